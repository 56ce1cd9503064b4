package relay

import (
	"encoding/json"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
)

// MaxMessageIDLength is the longest MessageId Service Bus accepts: an event
// whose id is longer cannot be published, since the topic's duplicate
// detection needs the event id as it is.
const MaxMessageIDLength = 128

// EventFormat says which documents of the change feed are outbox events and
// how the relay makes a message of one. Each field names a top-level field
// of the document, matched exactly (not case-insensitively); an empty field
// means its default, so the zero value reads the generic event shape:
//
//	{"id": "InvoiceIssued:inv-1", "type": "event", "eventType": "InvoiceIssued", "occurredAt": "2026-01-02T15:04:05Z", ...}
//
// A document whose TypeField is not the string TypeValue is not an event:
// the relay skips it and counts it in Stats.Skipped (the business
// documents, inbox markers and the relay's own leases that share the
// container). An event becomes one message: MessageId = its IDField (the
// event id, stable across republishes, which the topic's duplicate
// detection and the consumers' inbox markers key on), Subject = its
// SubjectField, ContentType "application/json" and, as its body, the whole
// document without the store's system properties (top-level fields whose
// names start with '_'). With PartitionKeyField set, the message also
// carries that field's string value as an application property of the same
// name, which a subscription's filter can read without the body. An event
// without an id of 1 to MaxMessageIDLength characters or without a subject
// cannot be published by any retry: the relay logs it at error and counts
// it in Stats.Unpublishable.
type EventFormat struct {
	// TypeField names the field that tells an event from the other
	// documents; "" means "type".
	TypeField string
	// TypeValue is the value of TypeField that marks an event; "" means
	// "event".
	TypeValue string
	// IDField names the field of the event id, the message's MessageId;
	// "" means "id".
	IDField string
	// SubjectField names the field of the event's type, the message's
	// Subject, by which subscribers dispatch; "" means "eventType".
	SubjectField string
	// PartitionKeyField names the field of the event's partition key
	// value, copied into the message's application properties under the
	// same name and logged with an unpublishable event; "" means none.
	PartitionKeyField string
	// TimeField names the field of the time the event occurred (RFC
	// 3339), which Hooks.Read reports the lag by when the store sets no
	// _ts; "" means "occurredAt".
	TimeField string
}

// withDefaults returns f with every empty field but PartitionKeyField set
// to its default.
func (f EventFormat) withDefaults() EventFormat {
	def := func(s *string, v string) {
		if *s == "" {
			*s = v
		}
	}
	def(&f.TypeField, "type")
	def(&f.TypeValue, "event")
	def(&f.IDField, "id")
	def(&f.SubjectField, "eventType")
	def(&f.TimeField, "occurredAt")
	return f
}

// eventHead is what the relay reads of a changed document to decide.
type eventHead struct{ ID, Type, Subject, Key string }

// message returns the message of an event document, or false for a
// document that is not an event (counted as skipped) or an event that cannot
// be a message (counted as unpublishable and logged).
func (r *Relay) message(fr string, doc []byte) (*azservicebus.Message, eventHead, bool) {
	var head eventHead
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(doc, &fields); err != nil || fields == nil {
		r.unpublishable.Add(1)
		r.log.Error("change feed document is not a JSON object: not published", "feed_range", fr)
		return nil, head, false
	}
	// Exact field names: encoding/json would match "Type" or "tYpe" too.
	str := func(k string) string {
		var v string
		if k != "" {
			_ = json.Unmarshal(fields[k], &v) // absent or not a string: empty, refused below
		}
		return v
	}
	f := r.o.Events
	head = eventHead{ID: str(f.IDField), Type: str(f.TypeField), Subject: str(f.SubjectField), Key: str(f.PartitionKeyField)}
	if head.Type != f.TypeValue {
		r.skipped.Add(1)
		return nil, head, false
	}
	if head.ID == "" || len(head.ID) > MaxMessageIDLength || head.Subject == "" {
		r.unpublishable.Add(1)
		r.log.Error("event without a usable id (1 to 128 characters) or subject: not published", "feed_range", fr,
			"partition_key", head.Key, "message_id", head.ID, "subject", head.Subject)
		return nil, head, false
	}
	for k := range fields {
		if len(k) > 0 && k[0] == '_' { // Cosmos DB's system properties: _rid, _self, _etag, _attachments, _ts, _lsn
			delete(fields, k)
		}
	}
	body, err := json.Marshal(fields)
	if err != nil {
		r.unpublishable.Add(1)
		r.log.Error("cannot encode event: not published", "message_id", head.ID, "error", err)
		return nil, head, false
	}
	id, subject, ct := head.ID, head.Subject, "application/json"
	m := &azservicebus.Message{MessageID: &id, Subject: &subject, ContentType: &ct, Body: body}
	if head.Key != "" {
		m.ApplicationProperties = map[string]any{f.PartitionKeyField: head.Key}
	}
	return m, head, true
}

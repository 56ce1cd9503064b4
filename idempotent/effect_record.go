package idempotent

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// EffectRecord is the two-phase record of an Effect, stored in the
// entity's partition. Its JSON holds the fields below under their tags,
// the partition key under EffectOptions.PartitionKeyField, the reference
// under EffectOptions.RefField, and the request's own fields beside them,
// so that a reader of the record (an audit, an operator) sees what was
// asked for: an invoice's receipt record reads
//
//	{"id":"Receipt:inv-1","invoiceId":"inv-1","type":"effect","state":"completed",
//	 "idempotencyKey":"Receipt:inv-1","to":"a@example.com","ref":"msg-7",...}
type EffectRecord struct {
	ID             string      `json:"id"`    // Effect.RecordID(PartitionKey)
	PartitionKey   string      `json:"-"`     // the entity id, stored under EffectOptions.PartitionKeyField
	Type           string      `json:"type"`  // EffectOptions.Type
	State          string      `json:"state"` // EffectInProgress or EffectCompleted
	IdempotencyKey string      `json:"idempotencyKey"`
	RequestHash    string      `json:"requestHash,omitempty"` // the entity's request hash, if the record was claimed with it
	Owner          string      `json:"owner"`                 // Claim.String(), for people
	Claim          EffectClaim `json:"claim"`                 // the delivery that holds (or last held) the claim
	Epoch          int64       `json:"epoch"`                 // incremented on every claim
	ClaimedAt      time.Time   `json:"claimedAt"`             // zero: released, claimable at once
	// FirstAttemptAt is when the key was first sent (the claim written
	// just before the first call). The downstream remembers the key for
	// its retention after the effect, which came after this time. Nil (a
	// record written without it) counts as older than any retention.
	FirstAttemptAt *time.Time `json:"firstAttemptAt,omitempty"`
	Attempts       int        `json:"attempts"` // the claims so far
	CompletedAt    *time.Time `json:"completedAt,omitempty"`
	// Ref is the downstream's reference, once completed; stored under
	// EffectOptions.RefField.
	Ref string `json:"-"`
	// Request is the effect's request, a JSON object whose fields are
	// stored beside the record's (none may have a name of the record's).
	// A record read back has it with its fields in sorted order.
	Request json.RawMessage `json:"-"`
}

// recordFields are the JSON names of EffectRecord's own fields.
var recordFields = map[string]bool{"id": true, "type": true, "state": true, "idempotencyKey": true, "requestHash": true,
	"owner": true, "claim": true, "epoch": true, "claimedAt": true, "firstAttemptAt": true, "attempts": true, "completedAt": true}

// encode returns rec's JSON: its own fields, the partition key and the
// reference under their configured names, and the request's fields.
func (e *Effect) encode(rec EffectRecord) ([]byte, error) {
	req := bytes.TrimSpace(rec.Request)
	if len(req) == 0 {
		req = []byte("{}")
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(req, &fields); err != nil || req[0] != '{' {
		return nil, fmt.Errorf("%s record: the request must be a JSON object: %s", e.o.Name, req)
	}
	for f := range fields {
		if recordFields[f] || f == e.o.PartitionKeyField || f == e.o.RefField || strings.HasPrefix(f, "_") {
			return nil, fmt.Errorf("%s record: the request's field %q is a field of the record", e.o.Name, f)
		}
	}
	b, err := json.Marshal(rec)
	if err != nil {
		return nil, err
	}
	b = b[:len(b)-1] // the closing brace
	b = appendField(b, e.o.PartitionKeyField, rec.PartitionKey)
	if rec.Ref != "" {
		b = appendField(b, e.o.RefField, rec.Ref)
	}
	if len(fields) > 0 {
		var c bytes.Buffer
		if err := json.Compact(&c, req); err != nil {
			return nil, err
		}
		inner := c.Bytes()
		b = append(append(b, ','), inner[1:len(inner)-1]...)
	}
	return append(b, '}'), nil
}

func appendField(b []byte, name, value string) []byte {
	n, _ := json.Marshal(name)
	v, _ := json.Marshal(value)
	b = append(append(append(b, ','), n...), ':')
	return append(b, v...)
}

// decode returns the record of entity stored as body under id. A body
// that does not decode, or is not entity's record, is an error matching
// ErrUnreadable.
func (e *Effect) decode(entity, id string, body []byte) (EffectRecord, error) {
	var rec EffectRecord
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &rec); err != nil {
		return EffectRecord{}, unreadableError(entity, id, err)
	}
	if err := json.Unmarshal(body, &fields); err != nil {
		return EffectRecord{}, unreadableError(entity, id, err)
	}
	var pk string
	if raw, ok := fields[e.o.PartitionKeyField]; ok {
		if err := json.Unmarshal(raw, &pk); err != nil {
			return EffectRecord{}, unreadableError(entity, id, fmt.Errorf("field %q: %w", e.o.PartitionKeyField, err))
		}
	}
	if rec.ID != id || pk != entity {
		return EffectRecord{}, unreadableError(entity, id, fmt.Errorf("it is not the %s record (id %q, %s %q)", e.o.Name, rec.ID, e.o.PartitionKeyField, pk))
	}
	rec.PartitionKey = pk
	if raw, ok := fields[e.o.RefField]; ok && string(raw) != "null" {
		if err := json.Unmarshal(raw, &rec.Ref); err != nil {
			return EffectRecord{}, unreadableError(entity, id, fmt.Errorf("field %q: %w", e.o.RefField, err))
		}
	}
	for f := range fields {
		if recordFields[f] || f == e.o.PartitionKeyField || f == e.o.RefField || strings.HasPrefix(f, "_") || f == "ttl" {
			delete(fields, f)
		}
	}
	req, err := json.Marshal(fields)
	if err != nil {
		return EffectRecord{}, unreadableError(entity, id, err)
	}
	rec.Request = req
	return rec, nil
}

// ErrUnreadable means a stored document cannot be decoded as what its id
// says it is: written by something else, or edited by hand. Every delivery
// would read the same bytes, so a message that needs it is Invalid at once
// (ReasonStoredDocumentUnreadable), not retried.
var ErrUnreadable = errors.New("stored document cannot be decoded")

// ReasonStoredDocumentUnreadable: a document the message needs is stored
// but cannot be decoded (see ErrUnreadable); the description names it, for
// an operator to repair or delete before resubmitting the message.
const ReasonStoredDocumentUnreadable = "StoredDocumentUnreadable"

func unreadableError(pk, id string, err error) error {
	return &UnreadableError{PartitionKey: pk, ID: id, Err: err}
}

// UnreadableError reports a stored document that cannot be decoded as what
// its id says it is. It matches ErrUnreadable.
type UnreadableError struct {
	PartitionKey string
	ID           string
	Err          error // the decoding error
}

func (e *UnreadableError) Error() string {
	return fmt.Sprintf("stored document %q in partition %q cannot be decoded: %v", e.ID, e.PartitionKey, e.Err)
}

// Unwrap returns the decoding error.
func (e *UnreadableError) Unwrap() error { return e.Err }

// Is reports whether target is ErrUnreadable.
func (e *UnreadableError) Is(target error) bool { return target == ErrUnreadable }

// storeFailure is StoreFailure, except that an error matching
// ErrUnreadable is Invalid at once.
func storeFailure(key, op string, err error) Result {
	if errors.Is(err, ErrUnreadable) {
		return Result{Outcome: Invalid, Key: key, Reason: ReasonStoredDocumentUnreadable,
			Description: op + ": " + err.Error() + "; every redelivery would read the same bytes: repair or delete the document, then resubmit the message", Err: err}
	}
	return StoreFailure(key, op, err)
}

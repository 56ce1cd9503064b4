package memstore

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/idempotent-consumer/sbcosmos/idempotent"
)

// Cosmos DB for NoSQL limits that the store enforces as Cosmos DB does.
const (
	// MaxIDLength is the longest document id the store accepts, in
	// characters. Cosmos DB documents a limit of 1,023 bytes (it was 255
	// characters in older versions of the service and SDKs); 255 characters
	// are at most 1,020 bytes of UTF-8, so this limit is never more lenient
	// than the service's and an id it accepts is accepted by Cosmos DB.
	MaxIDLength = 255
	// MaxBatchOperations is the most operations a transactional batch may
	// hold.
	MaxBatchOperations = 100
	// MaxRequestBytes is the largest request payload Cosmos DB accepts: the
	// JSON a transactional batch sends, or a single document.
	MaxRequestBytes = 2 << 20
	// MaxDocumentBytes is the largest document Cosmos DB stores, counting
	// the system properties it adds (see documentSize).
	MaxDocumentBytes = 2 << 20
	// MaxTTL is the largest per-document "ttl", in seconds.
	MaxTTL = 1<<31 - 1
)

// illegalIDChars are the characters Cosmos DB refuses in a document id.
const illegalIDChars = `/\?#`

// Sub-status codes Cosmos DB sends with some of the statuses the store
// returns.
const (
	// SubStatusPartitionKeyMismatch comes with a 400 when a document's
	// partition key value is not the one the request is addressed to.
	SubStatusPartitionKeyMismatch = 1001
)

// StatusError reports a request that the store refused, with the HTTP status
// code Cosmos DB answers the same request with, and the operation the way
// cosmosstore reports it: for a transactional batch, the failing operation's
// position (the other operations would have 424 Failed Dependency), or -1
// when the batch as a whole was refused; nothing was written.
//
// It matches the sentinel errors of package idempotent with errors.Is:
// 409 idempotent.ErrAlreadyExists, 404 idempotent.ErrNotFound, 412
// idempotent.ErrPreconditionFailed, 400 (every 400 this store returns is
// caused by the request's content) and 413 idempotent.ErrRejected, and the
// 429 and 503 of an Outage idempotent.ErrTransient.
type StatusError struct {
	Op           string // "create order", "read order", "create documents", "read document" or "replace document"
	PartitionKey string
	ID           string // the document the failing operation addressed; empty when the whole batch failed
	Index        int    // the failing batch operation, 0-based; -1 for a single-document call or a whole batch
	StatusCode   int    // the HTTP status code Cosmos DB returns
	SubStatus    int    // the Cosmos DB sub-status (x-ms-substatus), or 0
	Reason       string // what was wrong, for people
}

// BatchError is the former name of StatusError, for a failed transactional
// batch.
type BatchError = StatusError

func (e *StatusError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "memstore: %s %q", e.Op, e.PartitionKey)
	if e.ID != "" {
		fmt.Fprintf(&b, " id %q", e.ID)
	}
	b.WriteString(": ")
	if e.Index >= 0 {
		fmt.Fprintf(&b, "batch operation %d: ", e.Index)
	}
	fmt.Fprintf(&b, "%d %s", e.StatusCode, http.StatusText(e.StatusCode))
	if e.SubStatus != 0 {
		fmt.Fprintf(&b, " (sub-status %d)", e.SubStatus)
	}
	if e.Reason != "" {
		b.WriteString(": ")
		b.WriteString(e.Reason)
	}
	return b.String()
}

// Is reports whether the status code means target, one of the sentinel
// errors of package idempotent.
func (e *StatusError) Is(target error) bool {
	switch e.StatusCode {
	case http.StatusConflict:
		return target == idempotent.ErrAlreadyExists
	case http.StatusNotFound:
		return target == idempotent.ErrNotFound
	case http.StatusPreconditionFailed:
		return target == idempotent.ErrPreconditionFailed
	case http.StatusBadRequest, http.StatusRequestEntityTooLarge:
		return target == idempotent.ErrRejected
	case http.StatusTooManyRequests, http.StatusServiceUnavailable: // an Outage's
		return target == idempotent.ErrTransient
	}
	return false
}

// The store calls, as StatusError.Op names them (the names cosmosstore uses).
const (
	opCreateOrder     = "create order"
	opReadOrder       = "read order"
	opCreateDocuments = "create documents"
	opReadDocument    = "read document"
	opReplaceDocument = "replace document"
	opProbeDelete     = "probe delete"
)

// problem is a refusal of one document: a status code, a sub-status and a
// reason.
type problem struct {
	status, subStatus int
	reason            string
}

func badRequest(format string, args ...any) *problem {
	return &problem{status: http.StatusBadRequest, reason: fmt.Sprintf(format, args...)}
}

// checkID returns the problem Cosmos DB has with id, or nil.
func checkID(id string) *problem {
	switch {
	case id == "":
		return badRequest("the document has no id")
	case strings.ContainsAny(id, illegalIDChars):
		return badRequest(`the id contains one of the characters / \ ? # that Cosmos DB does not accept`)
	case utf8.RuneCountInString(id) > MaxIDLength:
		return badRequest("the id is %d characters long; the limit is %d", utf8.RuneCountInString(id), MaxIDLength)
	}
	return nil
}

// parsed is what the store reads from a document's JSON.
type parsed struct {
	compact []byte   // the body as the SDK sends it: compact JSON
	ttl     *int64   // nil: no "ttl" field; -1: never expires
	problem *problem // why Cosmos DB would refuse the document, or nil
}

// parseDocument checks body, the document that d.ID names, as Cosmos DB
// checks a document written to partition pk of a container partitioned on
// "/"+pkField (/orderId for the orders container) with a default TTL of -1:
// a JSON object whose "id" is a legal id, whose pkField is pk, whose "ttl", if present, is -1 or a positive
// integer of at most MaxTTL seconds, and whose size with the system
// properties is at most MaxDocumentBytes. An id field that is not d.ID is a
// programming error of the caller, returned as a plain error: Cosmos DB
// would silently store the document under the body's id.
func parseDocument(pkField, pk string, d idempotent.Document) (parsed, error) {
	var p parsed
	var buf bytes.Buffer
	if err := json.Compact(&buf, d.Body); err != nil {
		p.problem = badRequest("the document is not valid JSON: %v", err)
		return p, nil
	}
	p.compact = buf.Bytes()
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(p.compact, &fields); err != nil || fields == nil {
		p.problem = badRequest("the document is not a JSON object")
		return p, nil
	}
	var id string
	if raw, ok := fields["id"]; ok {
		if err := json.Unmarshal(raw, &id); err != nil {
			p.problem = badRequest("the document's id is not a string")
			return p, nil
		}
	}
	if id != d.ID {
		return p, fmt.Errorf("memstore: document ID %q is not the id %q in its body (Cosmos DB would store it under the body's id)", d.ID, id)
	}
	if p.problem = checkID(id); p.problem != nil {
		return p, nil
	}
	var pkValue string
	raw, ok := fields[pkField]
	if !ok || json.Unmarshal(raw, &pkValue) != nil || pkValue != pk {
		value := "no " + pkField + " field"
		if ok {
			value = pkField + " " + string(raw)
		}
		p.problem = &problem{status: http.StatusBadRequest, subStatus: SubStatusPartitionKeyMismatch,
			reason: fmt.Sprintf("the document's partition key value (%s) is not the request's %q", value, pk)}
		return p, nil
	}
	if raw, ok := fields["ttl"]; ok {
		ttl, err := strconv.ParseInt(string(raw), 10, 64)
		if err != nil || ttl == 0 || ttl < -1 || ttl > MaxTTL {
			p.problem = badRequest("ttl %s is not -1 or a whole number of seconds from 1 to %d", raw, MaxTTL)
			return p, nil
		}
		p.ttl = &ttl
	}
	if n := documentSize(len(p.compact)); n > MaxDocumentBytes {
		p.problem = &problem{status: http.StatusRequestEntityTooLarge,
			reason: fmt.Sprintf("the document is %d bytes with its system properties; the limit is %d", n, MaxDocumentBytes)}
	}
	return p, nil
}

// systemProperties is what Cosmos DB adds to every stored document, with
// values of the lengths it uses; a document's size limit counts them.
const systemProperties = `,"_rid":"AAAAAAAAAAAAAAAAAAAAAA==","_self":"dbs/AAAAAA==/colls/AAAAAAAAAAA=/docs/AAAAAAAAAAAAAAAAAAAAAA==/",` +
	`"_etag":"\"00000000-0000-0000-0000-000000000000\"","_attachments":"attachments/","_ts":1700000000`

// documentSize is the stored size of a document whose compact JSON is n
// bytes long.
func documentSize(n int) int { return n + len(systemProperties) }

// createOperation is a create operation of a transactional batch, written
// as azcosmos v1.5.0 writes it.
type createOperation []byte

// MarshalJSON writes {"operationType":"Create","resourceBody":BODY}, as the
// SDK's batchOperationCreate does.
func (b createOperation) MarshalJSON() ([]byte, error) {
	out := append([]byte(`{"operationType":"Create","resourceBody":`), b...)
	return append(out, '}'), nil
}

// batchPayloadSize returns the size of the request body azcosmos v1.5.0 sends
// for a transactional batch that creates these documents: the json.Marshal
// of its operations, which compacts each body and escapes <, >, &, U+2028
// and U+2029 in it. A body that is not JSON counts as it is (the SDK would
// not send it at all).
func batchPayloadSize(docs []idempotent.Document) int {
	n := 2 + max(len(docs)-1, 0) // brackets and commas
	for _, d := range docs {
		b, err := json.Marshal(createOperation(d.Body))
		if err != nil {
			b = append([]byte(`{"operationType":"Create","resourceBody":}`), d.Body...)
		}
		n += len(b)
	}
	return n
}

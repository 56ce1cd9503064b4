package cosmosstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/idempotent-consumer/sbcosmos/idempotent"
)

// Error reports a store call that failed. It matches idempotent.ErrAlreadyExists,
// idempotent.ErrNotFound, idempotent.ErrPreconditionFailed, idempotent.ErrRejected or
// idempotent.ErrTransient with errors.Is when the failure is one of those (see the
// package documentation for the mapping), and unwraps to the underlying
// error, such as an *azcore.ResponseError or a network error, when there is
// one. Any other failure is permanent, retrying the same call would fail the
// same way, except a call the caller canceled, which matches
// context.Canceled.
type Error struct {
	// Op is the store call: "create documents", "read document",
	// "replace document", "patch document", or Check's, Ping's and
	// Probe's "check", "read container", "ping" and "probe delete".
	Op string
	// PartitionKey is the partition key value of every document the call
	// addressed (for Check's "read container", the container; for a change
	// feed read, the feed range).
	PartitionKey string
	// ID is the document a single-document call (read document, replace
	// document) addressed; empty for the other calls.
	ID string
	// Index is the transactional batch operation that failed, its position
	// in the batch (the position in the docs given to CreateBatch), or -1
	// when the failure was not reported by one operation.
	Index      int
	StatusCode int    // HTTP status code of the failed operation or request; 0 when no response arrived
	SubStatus  int    // Cosmos DB sub-status code (x-ms-substatus), or 0
	ActivityID string // x-ms-activity-id of the response, for Azure support; empty when unknown
	Err        error  // the underlying error; nil when a batch response reported the failure

	kind error // one of the sentinel errors of package idempotent, or nil
}

// Error returns one line naming the call, the partition, the failed batch
// operation, the status code and the activity id, or the underlying error when
// no response arrived.
func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "cosmosstore: %s %q", e.Op, e.PartitionKey)
	if e.ID != "" {
		fmt.Fprintf(&b, " id %q", e.ID)
	}
	b.WriteString(": ")
	if e.Index >= 0 {
		fmt.Fprintf(&b, "batch operation %d: ", e.Index)
	}
	if e.StatusCode != 0 {
		fmt.Fprintf(&b, "%d %s", e.StatusCode, http.StatusText(e.StatusCode))
		if e.SubStatus != 0 {
			fmt.Fprintf(&b, " (sub-status %d", e.SubStatus)
			if e.StatusCode == http.StatusNotFound && e.SubStatus == subStatusOwnerNotFound {
				b.WriteString(": the database or container does not exist")
			}
			b.WriteString(")")
		}
		if e.ActivityID != "" {
			fmt.Fprintf(&b, " (activity id %s)", e.ActivityID)
		}
	}
	// An *azcore.ResponseError's text repeats the status and the whole
	// response body over many lines; the fields above say what matters.
	var re *azcore.ResponseError
	if e.Err != nil && !errors.As(e.Err, &re) {
		if e.StatusCode != 0 {
			b.WriteString(": ")
		} else if e.kind != nil {
			fmt.Fprintf(&b, "%v: ", e.kind)
		}
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

// Unwrap returns the sentinel error the failure matches, if any, and the
// underlying error, if any.
func (e *Error) Unwrap() []error {
	errs := make([]error, 0, 2)
	if e.kind != nil {
		errs = append(errs, e.kind)
	}
	if e.Err != nil {
		errs = append(errs, e.Err)
	}
	return errs
}

// Cosmos DB status codes that net/http has no name for.
const (
	statusRetryWith = 449 // a concurrent write conflicted; retry the request
)

// subStatusOwnerNotFound is the sub-status of a 404 caused by a missing
// database or container rather than a missing document.
const subStatusOwnerNotFound = 1003

// subStatusReadSessionNotAvailable is the sub-status of a 404 from a replica
// that has not yet reached the session token the read sent: the document may
// well exist. The SDK retries it; if it still comes back, it is transient.
const subStatusReadSessionNotAvailable = 1002

// kindOf returns the sentinel error a status code means, or nil for a
// permanent failure that is not the request's content's fault (401, 403, a
// missing database or container, anything unknown). A 404 means a missing
// document only on a call that addresses one document by id (a read, a
// replace, a patch, Probe's delete) and only without the sub-status of a
// missing database or container; with sub-status 1002 (the replica has not
// caught up with the session token) it is transient.
//
// A 400 is the request's content: the documents and ids the store sends come
// from the message (an id Cosmos DB does not accept, two operations on one
// id, a document whose partition key field does not hold the batch's
// partition key value, a "ttl" that is not -1 or a positive integer, more
// than 100 operations), and the store sends no other input that could be
// malformed. A 413 is a document or a batch over 2 MB. Both match
// idempotent.ErrRejected. A container partitioned on another path than the
// Store's also answers every write with 400 (sub-status 1001); Store.Check
// refuses such a container at start.
func kindOf(status, subStatus int, oneDocument bool) error {
	switch status {
	case http.StatusConflict:
		return idempotent.ErrAlreadyExists
	case http.StatusBadRequest, http.StatusRequestEntityTooLarge:
		return idempotent.ErrRejected
	case http.StatusNotFound:
		if subStatus == subStatusReadSessionNotAvailable {
			return idempotent.ErrTransient
		}
		if oneDocument && subStatus != subStatusOwnerNotFound {
			return idempotent.ErrNotFound
		}
	case http.StatusPreconditionFailed:
		return idempotent.ErrPreconditionFailed
	case http.StatusTooManyRequests, http.StatusServiceUnavailable, http.StatusRequestTimeout, statusRetryWith:
		return idempotent.ErrTransient
	}
	return nil
}

// addressesOneDocument reports whether op reads, replaces, patches or
// deletes one document by id, so that a 404 means that document is missing.
func addressesOneDocument(op string) bool {
	switch op {
	case opReadDocument, opReplaceDocument, opPatchDocument, opCheck, opPing, opProbeDelete:
		return true
	}
	return false
}

// classify turns an error from the azcosmos SDK into an *Error.
func classify(op, pk string, err error) error {
	return classifyDocument(op, pk, "", err)
}

// classifyDocument is classify for a call that addressed document id.
func classifyDocument(op, pk, id string, err error) error {
	e := &Error{Op: op, PartitionKey: pk, ID: id, Index: -1, Err: err}
	var re *azcore.ResponseError
	switch {
	case errors.As(err, &re):
		e.StatusCode = re.StatusCode
		if re.RawResponse != nil {
			e.SubStatus, _ = strconv.Atoi(re.RawResponse.Header.Get(headerSubStatus))
			e.ActivityID = re.RawResponse.Header.Get(headerActivityID)
		}
		e.kind = kindOf(e.StatusCode, e.SubStatus, addressesOneDocument(op))
	case errors.Is(err, context.Canceled):
		// The caller gave up; that is neither the store's verdict nor
		// worth a retry by itself. errors.Is finds context.Canceled.
	case isNetworkFailure(err):
		e.kind = idempotent.ErrTransient
	}
	return e
}

// isNetworkFailure reports whether err means the request or its response was
// lost on the way: a refused, reset or dropped connection, a failed dial or
// name lookup, or a timeout.
func isNetworkFailure(err error) bool {
	var opErr *net.OpError
	var netErr net.Error
	switch {
	case errors.As(err, &opErr):
		return true
	case errors.As(err, &netErr) && netErr.Timeout():
		return true
	case errors.Is(err, context.DeadlineExceeded),
		errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, io.EOF),
		errors.Is(err, syscall.ECONNREFUSED),
		errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, syscall.ECONNABORTED),
		errors.Is(err, syscall.EPIPE):
		return true
	}
	return false
}

// batchResult is what interpretBatch needs of a transactional batch response.
type batchResult struct {
	HTTPStatus  int    // status code of the whole batch: 200 when committed, 207 when not
	Success     bool   // the SDK's verdict: HTTPStatus != 207
	StatusCodes []int  // per operation, in batch order
	SubStatuses []int  // per operation, in batch order; nil or shorter when the response has none
	ActivityID  string // x-ms-activity-id of the response
}

// interpretBatch decides what a transactional batch response of ops
// operations means; op names the store call in the error.
//
// The per-operation status codes are authoritative. Cosmos DB commits a batch
// only if every operation succeeds; if one fails, it reports that operation's
// status and 424 (Failed Dependency) for every other, and Success is false.
// interpretBatch reports the first operation whose status is neither 2xx nor
// 424, whatever Success says, so a response that claims success for a failed
// operation is never taken as a commit. (Cosmos DB never sends one; cosmium
// v0.1.20, whose batches are not atomic, does.)
func interpretBatch(op, pk string, ops int, r batchResult) error {
	fail := func(index, status int) error {
		var sub int
		if index < len(r.SubStatuses) {
			sub = r.SubStatuses[index]
		}
		return &Error{Op: op, PartitionKey: pk, Index: index, StatusCode: status, SubStatus: sub,
			ActivityID: r.ActivityID, kind: kindOf(status, sub, false)}
	}
	if len(r.StatusCodes) != ops {
		return &Error{Op: op, PartitionKey: pk, Index: -1, StatusCode: r.HTTPStatus, ActivityID: r.ActivityID,
			Err: fmt.Errorf("transactional batch of %d operations returned %d results", ops, len(r.StatusCodes))}
	}
	for i, status := range r.StatusCodes {
		if !is2xx(status) && status != http.StatusFailedDependency {
			return fail(i, status)
		}
	}
	for i, status := range r.StatusCodes {
		if !is2xx(status) {
			// Only 424s: the batch failed without naming a cause.
			return fail(i, status)
		}
	}
	if !r.Success {
		return &Error{Op: op, PartitionKey: pk, Index: -1, StatusCode: r.HTTPStatus, ActivityID: r.ActivityID,
			Err: errors.New("transactional batch was not committed, yet every operation succeeded")}
	}
	return nil
}

func is2xx(status int) bool { return status >= 200 && status < 300 }

package cosmosstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"

	azruntime "github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/idempotent-consumer/sbcosmos/idempotent"
)

// These cases cannot run against cosmium: its transactional batch is not
// atomic and always answers 200 with Success true, so it never produces a
// 207 response with 424s, a throttled operation or an oversized batch. They
// run on the pure interpretation instead; gateway_test.go runs the main ones
// through the real SDK against a fake gateway.
func TestInterpretBatch_NotFaithfulInCosmium_StatusCodeSets(t *testing.T) {
	const activity = "3f2c1d1e-activity"
	tests := []struct {
		name      string
		r         batchResult
		ops       int
		wantNil   bool
		wantIs    error // nil: the error must match none of the sentinels
		wantIndex int
		wantCode  int
		wantText  []string
	}{
		{
			name:    "all created",
			r:       batchResult{HTTPStatus: 200, Success: true, StatusCodes: []int{201, 201}},
			ops:     2,
			wantNil: true,
		},
		{
			name:      "order exists: 409 on op 0, 424 on op 1",
			r:         batchResult{HTTPStatus: 207, StatusCodes: []int{409, 424}, ActivityID: activity},
			ops:       2,
			wantIs:    idempotent.ErrAlreadyExists,
			wantIndex: 0, wantCode: 409,
			wantText: []string{"batch operation 0", "409 Conflict", activity},
		},
		{
			name:      "event exists: 424 on op 0, 409 on op 1",
			r:         batchResult{HTTPStatus: 207, StatusCodes: []int{424, 409}},
			ops:       2,
			wantIs:    idempotent.ErrAlreadyExists,
			wantIndex: 1, wantCode: 409,
		},
		{
			name:      "throttled: 429",
			r:         batchResult{HTTPStatus: 207, StatusCodes: []int{429, 424}},
			ops:       2,
			wantIs:    idempotent.ErrTransient,
			wantIndex: 0, wantCode: 429,
		},
		{
			name:      "unavailable: 503",
			r:         batchResult{HTTPStatus: 207, StatusCodes: []int{503, 424}},
			ops:       2,
			wantIs:    idempotent.ErrTransient,
			wantIndex: 0, wantCode: 503,
		},
		{
			name:      "timeout: 408",
			r:         batchResult{HTTPStatus: 207, StatusCodes: []int{424, 408}},
			ops:       2,
			wantIs:    idempotent.ErrTransient,
			wantIndex: 1, wantCode: 408,
		},
		{
			name:      "retry with: 449",
			r:         batchResult{HTTPStatus: 207, StatusCodes: []int{449, 424}},
			ops:       2,
			wantIs:    idempotent.ErrTransient,
			wantIndex: 0, wantCode: 449,
		},
		{
			name:      "bad request: 400 is rejected",
			r:         batchResult{HTTPStatus: 207, StatusCodes: []int{400, 424}, ActivityID: activity},
			ops:       2,
			wantIs:    idempotent.ErrRejected,
			wantIndex: 0, wantCode: 400,
			wantText: []string{`create documents "ord-1"`, "batch operation 0", "400 Bad Request", activity},
		},
		{
			name:      "too large: 413 is rejected",
			r:         batchResult{HTTPStatus: 207, StatusCodes: []int{424, 413}},
			ops:       2,
			wantIs:    idempotent.ErrRejected,
			wantIndex: 1, wantCode: 413,
			wantText: []string{"batch operation 1", "413 Request Entity Too Large"},
		},
		{
			name:      "not found on a create is permanent",
			r:         batchResult{HTTPStatus: 207, StatusCodes: []int{404, 424}},
			ops:       2,
			wantIndex: 0, wantCode: 404,
		},
		{
			name:      "only 424s: failed without a cause",
			r:         batchResult{HTTPStatus: 207, StatusCodes: []int{424, 424}},
			ops:       2,
			wantIndex: 0, wantCode: 424,
		},
		{
			name:      "claims success with a conflict inside (cosmium v0.1.20 does this)",
			r:         batchResult{HTTPStatus: 200, Success: true, StatusCodes: []int{409, 409}},
			ops:       2,
			wantIs:    idempotent.ErrAlreadyExists,
			wantIndex: 0, wantCode: 409,
		},
		{
			name:      "claims success, order created but event conflicted",
			r:         batchResult{HTTPStatus: 200, Success: true, StatusCodes: []int{201, 409}},
			ops:       2,
			wantIs:    idempotent.ErrAlreadyExists,
			wantIndex: 1, wantCode: 409,
		},
		{
			name:      "not committed although every operation succeeded",
			r:         batchResult{HTTPStatus: 207, StatusCodes: []int{201, 201}},
			ops:       2,
			wantIndex: -1, wantCode: 207,
			wantText: []string{"207 Multi-Status", "not committed"},
		},
		{
			name:      "fewer results than operations",
			r:         batchResult{HTTPStatus: 200, Success: true, StatusCodes: []int{201}},
			ops:       2,
			wantIndex: -1, wantCode: 200,
			wantText: []string{"2 operations returned 1 results"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := interpretBatch(opCreateDocuments, "ord-1", tt.ops, tt.r)
			if tt.wantNil {
				if err != nil {
					t.Fatalf("interpretBatch = %v, want nil", err)
				}
				return
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("interpretBatch = %v (%T), want an *Error", err, err)
			}
			for _, sentinel := range []error{idempotent.ErrAlreadyExists, idempotent.ErrNotFound, idempotent.ErrPreconditionFailed, idempotent.ErrTransient, idempotent.ErrRejected} {
				if got, want := errors.Is(err, sentinel), sentinel == tt.wantIs; got != want {
					t.Errorf("errors.Is(%v, %v) = %v, want %v", err, sentinel, got, want)
				}
			}
			if e.Index != tt.wantIndex || e.StatusCode != tt.wantCode {
				t.Errorf("Index, StatusCode = %d, %d; want %d, %d", e.Index, e.StatusCode, tt.wantIndex, tt.wantCode)
			}
			if e.PartitionKey != "ord-1" || e.Op != "create documents" {
				t.Errorf("Op, PartitionKey = %q, %q; want %q, %q", e.Op, e.PartitionKey, "create documents", "ord-1")
			}
			if e.ActivityID != tt.r.ActivityID {
				t.Errorf("ActivityID = %q, want %q", e.ActivityID, tt.r.ActivityID)
			}
			for _, s := range tt.wantText {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not contain %q", err, s)
				}
			}
		})
	}
}

func TestKindOf(t *testing.T) {
	tests := []struct {
		status, subStatus int
		oneDocument       bool
		want              error
	}{
		{http.StatusConflict, 0, false, idempotent.ErrAlreadyExists},
		{http.StatusNotFound, 0, true, idempotent.ErrNotFound},
		{http.StatusNotFound, 0, false, nil},                     // a create cannot miss a document
		{http.StatusNotFound, subStatusOwnerNotFound, true, nil}, // the container is missing
		{http.StatusPreconditionFailed, 0, true, idempotent.ErrPreconditionFailed},
		{http.StatusPreconditionFailed, 0, false, idempotent.ErrPreconditionFailed},
		{http.StatusTooManyRequests, 3200, false, idempotent.ErrTransient},
		{http.StatusServiceUnavailable, 0, true, idempotent.ErrTransient},
		{http.StatusRequestTimeout, 0, false, idempotent.ErrTransient},
		{449, 0, false, idempotent.ErrTransient},
		{http.StatusBadRequest, 0, false, idempotent.ErrRejected},
		{http.StatusBadRequest, 1001, false, idempotent.ErrRejected},
		{http.StatusBadRequest, 0, true, idempotent.ErrRejected},
		{http.StatusUnauthorized, 0, true, nil},
		{http.StatusForbidden, 0, false, nil},
		{http.StatusRequestEntityTooLarge, 0, false, idempotent.ErrRejected},
		{http.StatusRequestEntityTooLarge, 0, true, idempotent.ErrRejected},
		{http.StatusInternalServerError, 0, false, nil},
	}
	for _, tt := range tests {
		if got := kindOf(tt.status, tt.subStatus, tt.oneDocument); got != tt.want {
			t.Errorf("kindOf(%d, %d, oneDocument=%v) = %v, want %v", tt.status, tt.subStatus, tt.oneDocument, got, tt.want)
		}
	}
}

func TestClassify(t *testing.T) {
	responseError := func(status int, header http.Header) error {
		req, err := http.NewRequest(http.MethodPost, "http://127.0.0.1/dbs/db/colls/c/docs", nil)
		if err != nil {
			t.Fatal(err)
		}
		if header == nil {
			header = http.Header{}
		}
		return azruntime.NewResponseError(&http.Response{
			StatusCode: status, Status: http.StatusText(status), Header: header,
			Body: io.NopCloser(strings.NewReader(`{"code":"x","message":"y"}`)), Request: req,
		})
	}
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	tests := []struct {
		name       string
		op         string
		err        error
		wantIs     error // nil: matches none of the sentinels
		wantCode   int
		wantSub    int
		wantActID  string
		wantInText string
	}{
		{name: "409 on create", op: opCreateDocuments, err: responseError(409, nil), wantIs: idempotent.ErrAlreadyExists, wantCode: 409},
		{name: "404 on read", op: opReadDocument, err: responseError(404, nil), wantIs: idempotent.ErrNotFound, wantCode: 404},
		{name: "404 on create is permanent", op: opCreateDocuments, err: responseError(404, nil), wantCode: 404},
		{
			name: "404 of a missing container on read is permanent", op: opReadDocument,
			err:      responseError(404, http.Header{"X-Ms-Substatus": {"1003"}}),
			wantCode: 404, wantSub: 1003, wantInText: "sub-status 1003",
		},
		{
			name: "429 with activity id", op: opCreateDocuments,
			err:    responseError(429, http.Header{"X-Ms-Activity-Id": {"act-1"}, "X-Ms-Substatus": {"3200"}}),
			wantIs: idempotent.ErrTransient, wantCode: 429, wantSub: 3200, wantActID: "act-1", wantInText: "activity id act-1",
		},
		{name: "404 on read document", op: opReadDocument, err: responseError(404, nil), wantIs: idempotent.ErrNotFound, wantCode: 404},
		{name: "404 on replace document", op: opReplaceDocument, err: responseError(404, nil), wantIs: idempotent.ErrNotFound, wantCode: 404},
		{name: "404 on create documents is permanent", op: opCreateDocuments, err: responseError(404, nil), wantCode: 404},
		{
			name: "404 of a missing container on replace is permanent", op: opReplaceDocument,
			err:      responseError(404, http.Header{"X-Ms-Substatus": {"1003"}}),
			wantCode: 404, wantSub: 1003,
		},
		{name: "412 on replace document", op: opReplaceDocument, err: responseError(412, nil), wantIs: idempotent.ErrPreconditionFailed, wantCode: 412, wantInText: "412 Precondition Failed"},
		{name: "409 on create documents", op: opCreateDocuments, err: responseError(409, nil), wantIs: idempotent.ErrAlreadyExists, wantCode: 409},
		{name: "503", op: opReadDocument, err: responseError(503, nil), wantIs: idempotent.ErrTransient, wantCode: 503},
		{name: "408", op: opCreateDocuments, err: responseError(408, nil), wantIs: idempotent.ErrTransient, wantCode: 408},
		{name: "449", op: opCreateDocuments, err: responseError(449, nil), wantIs: idempotent.ErrTransient, wantCode: 449},
		{name: "401 is permanent", op: opReadDocument, err: responseError(401, nil), wantCode: 401, wantInText: "401 Unauthorized"},
		{name: "refused connection", op: opCreateDocuments, err: fmt.Errorf("get account: %w", refused), wantIs: idempotent.ErrTransient, wantInText: "connection refused"},
		{name: "reset connection", op: opReadDocument, err: fmt.Errorf("read: %w", syscall.ECONNRESET), wantIs: idempotent.ErrTransient},
		{name: "connection closed mid-response", op: opCreateDocuments, err: fmt.Errorf("post: %w", io.ErrUnexpectedEOF), wantIs: idempotent.ErrTransient},
		{name: "deadline passed", op: opCreateDocuments, err: fmt.Errorf("post: %w", context.DeadlineExceeded), wantIs: idempotent.ErrTransient},
		{name: "canceled by the caller", op: opCreateDocuments, err: fmt.Errorf("post: %w", context.Canceled)},
		{name: "anything else is permanent", op: opCreateDocuments, err: errors.New("unsupported protocol scheme"), wantInText: "unsupported protocol scheme"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := classify(tt.op, "ord-1", tt.err)
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("classify = %T, want *Error", err)
			}
			for _, sentinel := range []error{idempotent.ErrAlreadyExists, idempotent.ErrNotFound, idempotent.ErrPreconditionFailed, idempotent.ErrTransient, idempotent.ErrRejected} {
				if got, want := errors.Is(err, sentinel), sentinel == tt.wantIs; got != want {
					t.Errorf("errors.Is(%v, %v) = %v, want %v", err, sentinel, got, want)
				}
			}
			if !errors.Is(err, tt.err) {
				t.Errorf("classify(%v) does not wrap the SDK's error", tt.err)
			}
			if e.StatusCode != tt.wantCode || e.SubStatus != tt.wantSub || e.ActivityID != tt.wantActID || e.Index != -1 {
				t.Errorf("StatusCode, SubStatus, ActivityID, Index = %d, %d, %q, %d; want %d, %d, %q, -1",
					e.StatusCode, e.SubStatus, e.ActivityID, e.Index, tt.wantCode, tt.wantSub, tt.wantActID)
			}
			if msg := err.Error(); strings.Contains(msg, "\n") || !strings.Contains(msg, tt.wantInText) || !strings.Contains(msg, `"ord-1"`) {
				t.Errorf("error text %q: want one line naming the order and containing %q", msg, tt.wantInText)
			}
		})
	}
}

func TestError_Text(t *testing.T) {
	tests := []struct {
		name string
		e    *Error
		want string
	}{
		{
			name: "replace of a document refused",
			e: &Error{Op: opReplaceDocument, PartitionKey: "ord-1", ID: "Payment:ord-1", Index: -1, StatusCode: 412,
				ActivityID: "act-1", kind: idempotent.ErrPreconditionFailed},
			want: `cosmosstore: replace document "ord-1" id "Payment:ord-1": 412 Precondition Failed (activity id act-1)`,
		},
		{
			name: "conflict in a batch of documents",
			e:    &Error{Op: opCreateDocuments, PartitionKey: "ord-1", Index: 1, StatusCode: 409, kind: idempotent.ErrAlreadyExists},
			want: `cosmosstore: create documents "ord-1": batch operation 1: 409 Conflict`,
		},
		{
			name: "read without a response",
			e:    &Error{Op: opReadDocument, PartitionKey: "ord-1", ID: "inbox:c:ord-1", Index: -1, Err: io.ErrUnexpectedEOF, kind: idempotent.ErrTransient},
			want: `cosmosstore: read document "ord-1" id "inbox:c:ord-1": transient store failure: unexpected EOF`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.e.Error(); got != tt.want {
				t.Errorf("Error() = %s\nwant      %s", got, tt.want)
			}
		})
	}
}

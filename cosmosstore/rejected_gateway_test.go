package cosmosstore_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/idempotent-consumer/sbcosmos/cosmosstore"
	"github.com/idempotent-consumer/sbcosmos/idempotent"
	"github.com/idempotent-consumer/sbcosmos/order"
)

// op is one operation result of a transactional batch answer.
type op struct{ status, subStatus int }

// batchReplyOps is a 207 transactional batch answer with per-operation
// status and sub-status codes, as Cosmos DB writes them.
func batchReplyOps(header map[string]string, ops ...op) reply {
	out := make([]map[string]any, len(ops))
	for i, o := range ops {
		out[i] = map[string]any{"statusCode": o.status, "subStatusCode": o.subStatus, "requestCharge": 0}
	}
	b, _ := json.Marshal(out)
	return reply{status: 207, header: header, body: string(b)}
}

// The answers Cosmos DB gives to a request whose content it refuses, one row
// per rule of section 9 of the design notes, through the real SDK. Cosmium
// v0.1.20 validates none of them (it accepts any id, any partition key value,
// any ttl and any size), so none of these can run there.
func TestGateway_CreateDocuments_ContentRefused_Rejected_NotFaithfulInCosmium(t *testing.T) {
	const activity = "act-400"
	h := map[string]string{"x-ms-activity-id": activity}
	failed := op{424, 0}
	tests := []struct {
		name      string
		reply     reply
		wantIndex int
		wantCode  int
		wantSub   int
	}{
		{name: "illegal id", reply: batchReplyOps(h, failed, op{400, 0}), wantIndex: 1, wantCode: 400},
		{name: "same id twice in the batch", reply: batchReplyOps(h, failed, op{400, 0}), wantIndex: 1, wantCode: 400},
		{name: "partition key value not the batch's", reply: batchReplyOps(h, op{400, 1001}, failed), wantIndex: 0, wantCode: 400, wantSub: 1001},
		{name: "ttl 0 or below -1", reply: batchReplyOps(h, op{400, 0}, failed), wantIndex: 0, wantCode: 400},
		{name: "document over 2 MB", reply: batchReplyOps(h, failed, op{413, 0}), wantIndex: 1, wantCode: 413},
		{name: "more than 100 operations: the whole request", reply: reply{status: 400, header: h, body: `{"code":"BadRequest"}`}, wantIndex: -1, wantCode: 400},
		{name: "batch over 2 MB: the whole request", reply: reply{status: 413, header: h, body: `{"code":"RequestEntityTooLarge"}`}, wantIndex: -1, wantCode: 413},
		{name: "whole request 400 with a sub-status", reply: reply{status: 400, header: map[string]string{"x-ms-activity-id": activity, "x-ms-substatus": "1001"}, body: `{}`}, wantIndex: -1, wantCode: 400, wantSub: 1001},
	}
	docs := []idempotent.Document{
		{ID: "a", Body: []byte(`{"id":"a","orderId":"ord-5"}`)},
		{ID: "b", Body: []byte(`{"id":"b","orderId":"ord-5"}`)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := newGateway(t, false)
			g.setBatch(tt.reply)
			s := storeFor(t, g.endpoint(), noRetries())
			for _, call := range []struct {
				name string
				do   func() error
			}{
				{"CreateBatch, one document", func() error { _, err := s.CreateBatch(t.Context(), "ord-5", docs); return err }},
				{"CreateBatch, an order", func() error { return writeOrder(t.Context(), s, newWrite("ord-5", "cust-1")) }},
			} {
				err := call.do()
				var e *cosmosstore.Error
				if !errors.As(err, &e) {
					t.Fatalf("%s = %v (%T), want *cosmosstore.Error", call.name, err, err)
				}
				checkSentinels(t, err, idempotent.ErrRejected)
				if idempotent.IsTransient(err) {
					t.Errorf("%s: a rejected request is transient: %v", call.name, err)
				}
				if e.Index != tt.wantIndex || e.StatusCode != tt.wantCode || e.SubStatus != tt.wantSub || e.ActivityID != activity {
					t.Errorf("%s: Index, StatusCode, SubStatus, ActivityID = %d, %d, %d, %q; want %d, %d, %d, %q",
						call.name, e.Index, e.StatusCode, e.SubStatus, e.ActivityID, tt.wantIndex, tt.wantCode, tt.wantSub, activity)
				}
				msg := err.Error()
				for _, want := range []string{fmt.Sprint(tt.wantCode), activity} {
					if !strings.Contains(msg, want) {
						t.Errorf("%s: error %q does not name %q", call.name, msg, want)
					}
				}
				if tt.wantSub != 0 && !strings.Contains(msg, fmt.Sprintf("sub-status %d", tt.wantSub)) {
					t.Errorf("%s: error %q does not name the sub-status", call.name, msg)
				}
			}
		})
	}
}

// Single-document calls refused for their content.
func TestGateway_DocumentCalls_ContentRefused_Rejected_NotFaithfulInCosmium(t *testing.T) {
	h := map[string]string{"x-ms-activity-id": "act-1"}
	tests := []struct {
		name  string
		reply reply
	}{
		{"400", reply{status: 400, header: h, body: `{"code":"BadRequest"}`}},
		{"400 partition key mismatch", reply{status: 400, header: map[string]string{"x-ms-activity-id": "act-1", "x-ms-substatus": "1001"}, body: `{}`}},
		{"413", reply{status: 413, header: h, body: `{"code":"RequestEntityTooLarge"}`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := newGateway(t, false)
			g.setReplace(tt.reply)
			g.setRead(tt.reply)
			s := storeFor(t, g.endpoint(), noRetries())
			_, err := s.ReplaceDocument(t.Context(), "ord-1", idempotent.Document{ID: "a", Body: []byte(`{"id":"a","orderId":"ord-1"}`)}, "")
			checkSentinels(t, err, idempotent.ErrRejected)
			_, _, err = s.ReadDocument(t.Context(), "ord-1", "a")
			checkSentinels(t, err, idempotent.ErrRejected)
			_, err = order.ReadOrder(t.Context(), s, "ord-1")
			checkSentinels(t, err, idempotent.ErrRejected)
			if !strings.Contains(err.Error(), "act-1") || !strings.Contains(err.Error(), tt.name[:3]) {
				t.Errorf("error %q does not name the status and activity id", err)
			}
		})
	}
}

// A missing database or container (404, sub-status 1003) is a configuration
// error on every call: never idempotent.ErrNotFound, never transient, never the
// message's fault.
func TestGateway_MissingContainer_1003_IsPermanentOnEveryCall(t *testing.T) {
	missing := reply{status: 404, header: map[string]string{"x-ms-substatus": "1003", "x-ms-activity-id": "act-9"}, body: `{"code":"NotFound"}`}
	g := newGateway(t, false)
	g.setBatch(missing)
	g.setRead(missing)
	g.setReplace(missing)
	s := storeFor(t, g.endpoint(), noRetries())
	calls := map[string]func() error{
		"CreateBatch, an order": func() error { return writeOrder(t.Context(), s, newWrite("ord-1", "cust-1")) },
		"CreateBatch, one document": func() error {
			_, err := s.CreateBatch(t.Context(), "ord-1", []idempotent.Document{{ID: "a", Body: []byte(`{"id":"a","orderId":"ord-1"}`)}})
			return err
		},
		"ReadOrder":    func() error { _, err := order.ReadOrder(t.Context(), s, "ord-1"); return err },
		"ReadDocument": func() error { _, _, err := s.ReadDocument(t.Context(), "ord-1", "a"); return err },
		"ReplaceDocument": func() error {
			_, err := s.ReplaceDocument(t.Context(), "ord-1", idempotent.Document{ID: "a", Body: []byte(`{"id":"a","orderId":"ord-1"}`)}, "")
			return err
		},
	}
	for name, call := range calls {
		t.Run(name, func(t *testing.T) {
			err := call()
			checkSentinels(t, err, nil)
			var e *cosmosstore.Error
			if !errors.As(err, &e) || e.StatusCode != 404 || e.SubStatus != 1003 {
				t.Fatalf("%s = %v, want a 404/1003 *cosmosstore.Error", name, err)
			}
			if !strings.Contains(err.Error(), "database or container does not exist") {
				t.Errorf("error %q does not say what is missing", err)
			}
		})
	}
}

// 401 and 403 are permanent and not the message's fault.
func TestGateway_Unauthorized_Forbidden_Permanent(t *testing.T) {
	for _, status := range []int{401, 403} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			r := reply{status: status, header: map[string]string{"x-ms-substatus": "5301"}, body: `{"code":"Forbidden"}`}
			g := newGateway(t, false)
			g.setBatch(r)
			g.setRead(r)
			g.setReplace(r)
			s := storeFor(t, g.endpoint(), noRetries())
			_, err := s.CreateBatch(t.Context(), "ord-1", []idempotent.Document{{ID: "a", Body: []byte(`{"id":"a","orderId":"ord-1"}`)}})
			checkSentinels(t, err, nil)
			_, _, err = s.ReadDocument(t.Context(), "ord-1", "a")
			checkSentinels(t, err, nil)
			_, err = s.ReplaceDocument(t.Context(), "ord-1", idempotent.Document{ID: "a", Body: []byte(`{"id":"a","orderId":"ord-1"}`)}, "")
			checkSentinels(t, err, nil)
			if idempotent.IsTransient(err) {
				t.Errorf("%d is transient: %v", status, err)
			}
		})
	}
}

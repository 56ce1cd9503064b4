package invoice_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idempotent-consumer/sbcosmos/examples/invoice"
	"github.com/idempotent-consumer/sbcosmos/idempotent"
)

// lease is the mail's lease in the tests: the queue's lock duration.
const lease = time.Minute

// mailStep is one delivery of an invoice message to the consumer with the
// mail, the faults it meets, and what it must decide.
type mailStep struct {
	body       string // %s is the case's invoice id; "" is the valid invoice
	seq        int64  // the copy's SequenceNumber
	count      uint32 // DeliveryCount
	later      time.Duration
	createErr  error // the store's creates fail with it
	mailErr    error // the mail service fails with it
	crash      bool  // the process crashes right after the mail service answered: no store call reaches the store any more
	cancel     bool  // the delivery's context ends right after the mail service answered
	want       idempotent.Outcome
	reason     string
	resumed    bool
	calls      int     // the mail service's calls so far
	mails      int     // the mails really sent so far
	roundTrips *[3]int // if set, the creates, reads and replaces this delivery costs
}

// TestConsumer_Mail: the invoice consumer with its mail makes the mail
// exactly once per invoice, through every decision and every failure, on
// the in-memory model and on cosmium: a repeated call is only ever made
// with the invoice's one key, which the mail service deduplicates.
func TestConsumer_Mail(t *testing.T) {
	transient := fmt.Errorf("503 from the mail service: %w", idempotent.ErrTransient)
	refused := fmt.Errorf("422 from the mail service, no such customer: %w", idempotent.ErrEffectRejected)
	storeDown := fmt.Errorf("503 Service Unavailable: %w", idempotent.ErrTransient)
	created := mailStep{seq: 1, count: 1, want: idempotent.Created, calls: 1, mails: 1}
	tests := []struct {
		name  string
		steps []mailStep
	}{
		{"created: one mail, the batch with the claim and the completed mark", []mailStep{
			{seq: 1, count: 1, want: idempotent.Created, calls: 1, mails: 1, roundTrips: &[3]int{1, 0, 1}}}},
		{"redelivery: a duplicate, one read, no call", []mailStep{created,
			{seq: 1, count: 2, want: idempotent.Duplicate, calls: 1, mails: 1, roundTrips: &[3]int{0, 1, 0}}}},
		{"a producer's resend: a duplicate, no call", []mailStep{created,
			{seq: 2, count: 1, want: idempotent.Duplicate, calls: 1, mails: 1}}},
		{"id reused: a mismatch, no mail for the other content", []mailStep{created,
			{body: body("%s", "amountMinor", "2500"), seq: 3, count: 1, want: idempotent.Mismatch, reason: invoice.ReasonInvoiceIDReused, calls: 1, mails: 1}}},
		{"invalid: no record, no mail", []mailStep{
			{body: body("%s", "currency", `"eur"`), seq: 1, count: 1, want: idempotent.Invalid, reason: idempotent.ReasonInvalidMessage}}},
		{"the store fails at the create: no mail; the redelivery creates and mails", []mailStep{
			{seq: 1, count: 1, createErr: storeDown, want: idempotent.Transient, reason: idempotent.ReasonStoreUnavailable},
			{seq: 1, count: 2, want: idempotent.Created, calls: 1, mails: 1}}},
		{"the mail service fails: retried; the redelivery sends the one mail with the same key", []mailStep{
			{seq: 1, count: 1, mailErr: transient, want: idempotent.Transient, reason: invoice.ReasonMailUnavailable, calls: 1},
			{seq: 1, count: 2, want: idempotent.Duplicate, calls: 2, mails: 1},
			{seq: 1, count: 3, want: idempotent.Duplicate, calls: 2, mails: 1}}},
		{"the mail service refuses the mail: dead-lettered", []mailStep{
			{seq: 1, count: 1, mailErr: refused, want: idempotent.Invalid, reason: invoice.ReasonMailRejected, calls: 1}}},
		{"a crash between the call and the completed record: the copy's redelivery resumes at once, with the same key", []mailStep{
			{seq: 1, count: 1, crash: true, want: idempotent.Transient, reason: idempotent.ReasonStoreUnavailable, calls: 1, mails: 1},
			{seq: 1, count: 2, want: idempotent.Duplicate, resumed: true, calls: 2, mails: 1},
			{seq: 1, count: 3, want: idempotent.Duplicate, calls: 2, mails: 1},
			{seq: 2, count: 1, want: idempotent.Duplicate, calls: 2, mails: 1}}},
		{"a crash between the call and the completed record: another copy waits for the lease, then resumes with the same key", []mailStep{
			{seq: 1, count: 1, crash: true, want: idempotent.Transient, reason: idempotent.ReasonStoreUnavailable, calls: 1, mails: 1},
			{seq: 2, count: 1, want: idempotent.Transient, reason: invoice.ReasonMailInProgress, calls: 1, mails: 1},
			{seq: 2, count: 2, later: lease, want: idempotent.Duplicate, resumed: true, calls: 2, mails: 1}}},
		{"the context ends right after the call: the completed mark is written all the same", []mailStep{
			{seq: 1, count: 1, cancel: true, want: idempotent.Created, calls: 1, mails: 1},
			{seq: 1, count: 2, want: idempotent.Duplicate, calls: 1, mails: 1}}},
	}
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			for i, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					id := fmt.Sprintf("inv-mail-%02d", i)
					store := &docStore{DocumentStore: b.open(t)}
					svc, clk := newMailService(), newClock()
					mail := invoice.NewMailEffect(store, invoice.MailOptions{Mailer: svc, Lease: lease, Owner: "worker-1", Now: clk.Now})
					if err := mail.Err(); err != nil {
						t.Fatal(err)
					}
					c := invoice.NewConsumer(store, idempotent.WithEffect(mail))
					var last idempotent.Result
					for n, s := range tt.steps {
						clk.Add(s.later)
						store.down.Store(false) // the process (re)started
						store.setCreateErr(s.createErr)
						svc.mu.Lock()
						svc.fail, svc.afterSend = s.mailErr, nil
						svc.mu.Unlock()
						ctx, cancel := context.WithCancel(t.Context())
						switch {
						case s.crash:
							svc.afterSend = func() { store.down.Store(true) }
						case s.cancel:
							svc.afterSend = cancel
						}
						store.roundTrips()
						msgBody := strings.ReplaceAll(cmpOr(s.body, body("%s")), "%s", id)
						last = c.Process(ctx, idempotent.Message{ID: id, Body: []byte(msgBody), SequenceNumber: s.seq, DeliveryCount: s.count})
						cancel()
						trips := store.roundTrips()
						if last.Outcome != s.want || last.Reason != s.reason || last.Resumed != s.resumed {
							t.Fatalf("delivery %d: %v %q resumed %v (%s), want %v %q resumed %v", n+1, last.Outcome, last.Reason, last.Resumed, last.Description, s.want, s.reason, s.resumed)
						}
						if calls, mails := svc.counts(); calls != s.calls || mails != s.mails {
							t.Errorf("delivery %d: %d calls and %d mails sent so far, want %d and %d", n+1, calls, mails, s.calls, s.mails)
						}
						if s.roundTrips != nil && (trips[0] != int64(s.roundTrips[0]) || trips[1] != int64(s.roundTrips[1]) || trips[2] != int64(s.roundTrips[2])) {
							t.Errorf("delivery %d: %d creates, %d reads, %d replaces; want %v", n+1, trips[0], trips[1], trips[2], *s.roundTrips)
						}
					}
					if other := svc.otherKeys(invoice.MailName + ":" + id); len(other) > 0 {
						t.Errorf("calls with other keys than %s:%s: %v", invoice.MailName, id, other)
					}
					checkMailRecord(t, mail, id, last.Outcome == idempotent.Created || last.Outcome == idempotent.Duplicate, svc)
				})
			}
		})
	}
}

// checkMailRecord checks that the invoice's mail record is completed with
// the mail service's message id when done, and holds the mail's request.
func checkMailRecord(t *testing.T, mail *idempotent.Effect, id string, done bool, svc *mailService) {
	t.Helper()
	rec, _, err := mail.Read(context.Background(), id)
	if errors.Is(err, idempotent.ErrNotFound) && !done {
		return
	}
	if err != nil {
		t.Fatalf("read the mail record: %v", err)
	}
	if rec.ID != invoice.MailName+":"+id || rec.IdempotencyKey != rec.ID {
		t.Errorf("record %s with key %s, want %s:%s for both", rec.ID, rec.IdempotencyKey, invoice.MailName, id)
	}
	if !strings.Contains(string(rec.Request), `"customerId":"cust-42"`) {
		t.Errorf("record request %s lacks the customer", rec.Request)
	}
	if !done {
		return
	}
	svc.mu.Lock()
	want := svc.byKey[rec.IdempotencyKey]
	svc.mu.Unlock()
	if rec.State != idempotent.EffectCompleted || rec.Ref != want || want == "" {
		t.Errorf("record %s ref %q, want completed with the mail's id %q", rec.State, rec.Ref, want)
	}
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// TestConsumer_Mail_Concurrent: 32 concurrent deliveries of one invoice,
// first deliveries and redeliveries of one copy mixed, send one mail; a
// delivery that found the mail in progress succeeds on its redelivery; at
// most one delivery returns Created (exactly one where the batch is atomic
// and no redelivery took the creator's claim over), and every call carries
// the invoice's one key.
func TestConsumer_Mail_Concurrent(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			const id, n = "inv-mail-race", 32
			store := b.open(t)
			svc := newMailService()
			mail := invoice.NewMailEffect(store, invoice.MailOptions{Mailer: svc, Lease: lease, Owner: "worker-1"})
			c := invoice.NewConsumer(store, idempotent.WithEffect(mail))
			results := make([]idempotent.Result, n)
			counts := make([]uint32, n)
			start := make(chan struct{})
			var wg sync.WaitGroup
			for i := range results {
				counts[i] = uint32(1 + i%2)
				wg.Go(func() {
					<-start
					results[i] = c.Process(t.Context(), idempotent.Message{ID: id, Body: []byte(body(id)), SequenceNumber: 7, DeliveryCount: counts[i]})
				})
			}
			close(start)
			wg.Wait()
			outcomes := map[string]int{}
			created := 0
			for round := 0; ; round++ {
				pending := 0
				for i, r := range results {
					switch {
					case r.Outcome == idempotent.Created:
						if round == 0 {
							created++
						}
						continue
					case r.Outcome == idempotent.Duplicate:
						continue
					case r.Outcome != idempotent.Transient || r.DependencyFailed():
						t.Fatalf("a delivery decided %v %q: %s", r.Outcome, r.Reason, r.Description)
					}
					if round == 0 {
						outcomes[r.Reason]++
					}
					// Redelivered: a later delivery of the same copy.
					pending++
					counts[i] += 2
					results[i] = c.Process(t.Context(), idempotent.Message{ID: id, Body: []byte(body(id)), SequenceNumber: 7, DeliveryCount: counts[i]})
				}
				if pending == 0 {
					break
				}
				if round == 3 {
					t.Fatalf("%d deliveries still retried after %d redeliveries", pending, round+1)
				}
			}
			t.Logf("first round: %d created, retried %v", created, outcomes)
			if created > 1 {
				t.Errorf("%d deliveries returned Created, want at most one", created)
			}
			if calls, mails := svc.counts(); mails != 1 || calls < 1 {
				t.Errorf("%d calls sent %d mails, want exactly one mail", calls, mails)
			}
			if other := svc.otherKeys(invoice.MailName + ":" + id); len(other) > 0 {
				t.Errorf("calls with other keys: %v", other)
			}
			checkStored(t, store, id, true, body(id))
			checkMailRecord(t, mail, id, true, svc)
		})
	}
}

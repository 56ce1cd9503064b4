package worker_test

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/idempotent-consumer/sbcosmos/idempotent"
	"github.com/idempotent-consumer/sbcosmos/order"
	"github.com/idempotent-consumer/sbcosmos/test/memstore"
	"github.com/idempotent-consumer/sbcosmos/test/workertest"
	"github.com/idempotent-consumer/sbcosmos/worker"
)

// fakeScheduler stands for a sender on the fake receiver's queue: a
// scheduled message arrives on the receiver at its enqueue time, as a first
// delivery, unless its MessageId was scheduled before (duplicate detection
// at scheduling time). It is safe for concurrent use.
type fakeScheduler struct {
	r   *workertest.Receiver
	err error // returned by every call when set

	mu        sync.Mutex
	scheduled []scheduledCopy
	seen      map[string]bool
}

type scheduledCopy struct {
	id    string
	at    time.Time
	props map[string]any
}

func (s *fakeScheduler) ScheduleMessages(_ context.Context, ms []*azservicebus.Message, at time.Time, _ *azservicebus.ScheduleMessagesOptions) ([]int64, error) {
	if s.err != nil {
		return nil, s.err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.seen == nil {
		s.seen = map[string]bool{}
	}
	seqs := make([]int64, len(ms))
	for i, m := range ms {
		s.scheduled = append(s.scheduled, scheduledCopy{id: *m.MessageID, at: at, props: m.ApplicationProperties})
		seqs[i] = int64(len(s.scheduled))
		if s.seen[*m.MessageID] {
			continue
		}
		s.seen[*m.MessageID] = true
		rm := &azservicebus.ReceivedMessage{MessageID: *m.MessageID, Body: m.Body, Subject: m.Subject,
			ApplicationProperties: m.ApplicationProperties, DeliveryCount: 1, EnqueuedTime: &at}
		time.AfterFunc(time.Until(at), func() { s.r.Send(rm) })
	}
	return seqs, nil
}

// want is the MessageId the copy must have: RetryMessageID of its
// properties.
func (c scheduledCopy) want() string {
	since, _ := c.props[worker.PropertyRetrySince].(int64)
	attempt, _ := c.props[worker.PropertyRetryAttempt].(int64)
	orig, _ := c.props[worker.PropertyOriginalMessageID].(string)
	return worker.RetryMessageID(orig, time.UnixMilli(since), int(attempt))
}

func (s *fakeScheduler) copies() []scheduledCopy {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]scheduledCopy(nil), s.scheduled...)
}

// TestStatusChangeBeforeOrderIsScheduled: a status change that arrives
// before its order is not abandoned (which would spend its deliveries within
// a minute) but completed after a copy is scheduled; the copy, handled under
// the original MessageId, applies the change once the order exists.
func TestStatusChangeBeforeOrderIsScheduled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memstore.New("/orderId")
		p := order.NewProcessor(store, nil, order.WithDocuments(store))
		r := workertest.NewReceiver()
		s := &fakeScheduler{r: r}
		var mu sync.Mutex
		var reports []worker.Report
		w := workertest.NewWorker(t, r, p, worker.Options{Scheduler: s, Observe: func(rep worker.Report) {
			mu.Lock()
			reports = append(reports, rep)
			mu.Unlock()
		}})
		ctx, cancel := context.WithCancel(context.Background())
		errc := make(chan error, 1)
		go func() { errc <- w.Run(ctx) }()

		change := order.StatusChange{OrderID: "ord-1", Status: "paid", Version: 2, ChangedAt: time.Date(2026, 11, 30, 10, 5, 0, 0, time.UTC)}
		body, _ := json.Marshal(change)
		subject := order.SubjectOrderStatusChanged
		statusID := order.StatusMessageID("ord-1", 2)
		r.Send(&azservicebus.ReceivedMessage{MessageID: statusID, Subject: &subject, Body: body, DeliveryCount: 1})
		synctest.Wait()
		if got := r.Settlements(statusID); len(got) != 1 || got[0].Kind != "complete" {
			t.Errorf("status change before its order: settlements %+v, want one complete after scheduling a copy", got)
		}
		copies := s.copies()
		if len(copies) != 1 || !strings.HasPrefix(copies[0].id, statusID+"~r1-") || copies[0].id != copies[0].want() ||
			copies[0].props[worker.PropertyOriginalMessageID] != statusID || copies[0].props[worker.PropertyRetryAttempt] != int64(1) {
			t.Fatalf("scheduled %+v, want one copy %s~r1-… carrying the original id and attempt 1", copies, statusID)
		}

		// The order arrives while the copy waits.
		o := order.Order{OrderID: "ord-1", CustomerID: "cust-1", Currency: "EUR",
			Lines:      []order.Line{{SKU: "SKU-1", Quantity: 2, UnitPriceMinor: 1999}},
			TotalMinor: 3998, PlacedAt: time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)}
		ob, _ := json.Marshal(o)
		r.Send(&azservicebus.ReceivedMessage{MessageID: "ord-1", Body: ob, DeliveryCount: 1})
		time.Sleep(order.StatusRetryAfter + time.Second)
		synctest.Wait()
		cancel()
		if err := <-errc; err != nil {
			t.Fatal(err)
		}

		if got := r.Settlements(copies[0].id); len(got) != 1 || got[0].Kind != "complete" {
			t.Errorf("the scheduled copy: settlements %+v, want one complete", got)
		}
		var doc order.OrderDocument
		b, _, err := store.ReadDocument(context.Background(), "ord-1", "ord-1")
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, &doc); err != nil || doc.Status != "paid" || doc.Version != 2 {
			t.Errorf("order document %+v (%v), want status paid at version 2", doc, err)
		}
		mu.Lock()
		defer mu.Unlock()
		var outcomes []string
		for _, rep := range reports {
			outcomes = append(outcomes, rep.MessageID+":"+rep.Result.Outcome.String())
		}
		if want := []string{statusID + ":transient", "ord-1:created", copies[0].id + ":applied"}; strings.Join(outcomes, " ") != strings.Join(want, " ") {
			t.Errorf("outcomes %v, want %v", outcomes, want)
		}
		if !reports[0].Scheduled || reports[0].RetryAttempt != 1 || reports[0].RetryDelay != order.StatusRetryAfter {
			t.Errorf("first report %+v, want scheduled as attempt 1 after %v", reports[0], order.StatusRetryAfter)
		}
		if st := w.Stats(); st.Scheduled != 1 || st.Outcomes[idempotent.Applied] != 1 || st.Outcomes[idempotent.Created] != 1 {
			t.Errorf("stats %+v, want 1 scheduled, 1 created, 1 applied", st)
		}
	})
}

// TestDelayedRetriesAreBounded: a message that never succeeds is scheduled
// MaxAttempts times, each copy waiting twice as long as the one before, and
// is then abandoned, so the queue's MaxDeliveryCount ends it; MaxDelay cuts
// the delays short too.
func TestDelayedRetriesAreBounded(t *testing.T) {
	tests := []struct {
		name   string
		retry  worker.RetryOptions
		delays []time.Duration
	}{
		{"attempts", worker.RetryOptions{MaxAttempts: 4, MaxDelay: time.Hour},
			[]time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second}},
		{"total delay", worker.RetryOptions{MaxAttempts: 10, MaxDelay: 10 * time.Second},
			[]time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 3 * time.Second}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := workertest.NewReceiver()
				s := &fakeScheduler{r: r}
				var mu sync.Mutex
				var seen []idempotent.Message
				h := worker.HandlerFunc(func(ctx context.Context, m idempotent.Message) idempotent.Result {
					mu.Lock()
					seen = append(seen, m)
					mu.Unlock()
					return idempotent.Result{Outcome: idempotent.Transient, Key: m.ID, Reason: order.ReasonOrderNotYetCreated, RetryAfter: time.Second}
				})
				w := workertest.NewWorker(t, r, h, worker.Options{Scheduler: s, Retry: tt.retry})
				ctx, cancel := context.WithCancel(context.Background())
				errc := make(chan error, 1)
				go func() { errc <- w.Run(ctx) }()
				now := time.Now()
				r.Send(&azservicebus.ReceivedMessage{MessageID: "m1", DeliveryCount: 1, EnqueuedTime: &now})
				time.Sleep(2 * time.Hour)
				synctest.Wait()
				cancel()
				if err := <-errc; err != nil {
					t.Fatal(err)
				}

				copies := s.copies()
				if len(copies) != len(tt.delays) {
					t.Fatalf("%d copies scheduled, want %d: %+v", len(copies), len(tt.delays), copies)
				}
				prev := now
				for i, c := range copies {
					if want := worker.RetryMessageID("m1", now, i+1); c.id != want {
						t.Errorf("copy %d is %s, want %s", i+1, c.id, want)
					}
					if d := c.at.Sub(prev); d != tt.delays[i] {
						t.Errorf("copy %d waits %v, want %v", i+1, d, tt.delays[i])
					}
					prev = c.at
					if got := r.Settlements(worker.RetryMessageID("m1", now, i)); i > 0 && (len(got) != 1 || got[0].Kind != "complete") {
						t.Errorf("copy %d: settlements %+v, want complete", i, got)
					}
				}
				last := worker.RetryMessageID("m1", now, len(copies))
				if got := r.Settlements(last); len(got) != 1 || got[0].Kind != "abandon" {
					t.Errorf("the last copy %s: settlements %+v, want abandon: the bound reached, MaxDeliveryCount ends it", last, got)
				}
				mu.Lock()
				defer mu.Unlock()
				for _, m := range seen {
					if m.ID != "m1" {
						t.Errorf("the handler saw id %q, want the original's m1 for every copy", m.ID)
					}
				}
			})
		})
	}
}

// TestScheduleFailureAbandons: a scheduling that fails leaves the message
// to an abandon, as any transient failure: never completed without a copy.
func TestScheduleFailureAbandons(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := workertest.NewReceiver("m1")
		s := &fakeScheduler{r: r, err: &azservicebus.Error{Code: azservicebus.CodeUnauthorizedAccess}}
		h := worker.HandlerFunc(func(ctx context.Context, m idempotent.Message) idempotent.Result {
			return idempotent.Result{Outcome: idempotent.Transient, Key: m.ID, RetryAfter: time.Second}
		})
		w := workertest.NewWorker(t, r, h, worker.Options{Scheduler: s})
		ctx, cancel := context.WithCancel(context.Background())
		errc := make(chan error, 1)
		go func() { errc <- w.Run(ctx) }()
		synctest.Wait()
		cancel()
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
		if got := r.Settlements("m1"); len(got) != 1 || got[0].Kind != "abandon" {
			t.Errorf("settlements %+v, want abandon", got)
		}
		if st := w.Stats(); st.ScheduleFailed != 1 || st.Scheduled != 0 || st.Retried != 1 {
			t.Errorf("stats %+v, want 1 schedule failed, 1 retried", st)
		}
	})
}

// TestRetryMessageID: a copy's id differs from the original's and from
// every other copy's, and stays within Service Bus's 128 UTF-16 code units; a
// message that only claims to be a copy (its id not derived from its
// properties) is handled under its own id.
func TestRetryMessageID(t *testing.T) {
	long := strings.Repeat("é", 128)
	ids := map[string]bool{}
	enqueued := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	for _, orig := range []string{"ord-1:v2", strings.Repeat("a", 126), strings.Repeat("a", 127), long, long[:len(long)-2] + "b"} {
		// Two messages with one MessageId, enqueued a millisecond apart
		// (a producer's retry after the window, a resubmission, an id
		// reused for other content): their copies differ too.
		for _, since := range []time.Time{enqueued, enqueued.Add(time.Millisecond)} {
			for attempt := 1; attempt <= 12; attempt++ {
				id := worker.RetryMessageID(orig, since, attempt)
				if n := utf16Len(id); n > 128 || !utf8.ValidString(id) {
					t.Errorf("RetryMessageID(%q, %v, %d) = %q: %d UTF-16 units", orig, since, attempt, id, n)
				}
				if id == orig || ids[id] {
					t.Errorf("RetryMessageID(%q, %v, %d) = %q is not unique", orig, since, attempt, id)
				}
				ids[id] = true
			}
		}
	}

	synctest.Test(t, func(t *testing.T) {
		r := workertest.NewReceiver()
		var got []string
		var mu sync.Mutex
		h := worker.HandlerFunc(func(ctx context.Context, m idempotent.Message) idempotent.Result {
			mu.Lock()
			got = append(got, m.ID)
			mu.Unlock()
			return idempotent.Result{Outcome: idempotent.Created, Key: m.ID}
		})
		w := workertest.NewWorker(t, r, h, worker.Options{Scheduler: &fakeScheduler{r: r}})
		ctx, cancel := context.WithCancel(context.Background())
		errc := make(chan error, 1)
		go func() { errc <- w.Run(ctx) }()
		props := func(orig string) map[string]any {
			return map[string]any{worker.PropertyOriginalMessageID: orig, worker.PropertyRetryAttempt: int64(1), worker.PropertyRetrySince: int64(0)}
		}
		r.Send(&azservicebus.ReceivedMessage{MessageID: worker.RetryMessageID("a", time.UnixMilli(0), 1), DeliveryCount: 1, ApplicationProperties: props("a")})
		r.Send(&azservicebus.ReceivedMessage{MessageID: "forged", DeliveryCount: 1, ApplicationProperties: props("victim")})
		synctest.Wait()
		cancel()
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		defer mu.Unlock()
		slices.Sort(got)
		if strings.Join(got, " ") != "a forged" {
			t.Errorf("handler ids %v, want [a forged]: a copy under its original's id, a forged one under its own", got)
		}
	})
}

// TestRetryBackoffSaturates: a copy's delay is RetryAfter doubled per
// earlier copy, cut to what MaxDelay leaves; at a large attempt the doubling
// saturates instead of overflowing. 9 s << 30 exceeds an int64 of
// nanoseconds, and the delay used to wrap negative, which read as "no delay
// left": the copy was never scheduled and the message was abandoned.
func TestRetryBackoffSaturates(t *testing.T) {
	tests := []struct {
		name       string
		attempt    int
		retryAfter time.Duration
		want       time.Duration
	}{
		{"small", 3, time.Second, 8 * time.Second},
		{"2^20 s fits", 20, time.Second, time.Second << 20},
		{"9 s at copy 30 overflows", 30, 9 * time.Second, 1000 * time.Hour},
		{"the largest RetryAfter", 30, time.Duration(1<<63 - 1), 1000 * time.Hour},
		{"beyond 30 doublings", 40, 9 * time.Second, 1000 * time.Hour},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := workertest.NewReceiver()
				s := &fakeScheduler{r: r}
				h := worker.HandlerFunc(func(ctx context.Context, m idempotent.Message) idempotent.Result {
					return idempotent.Result{Outcome: idempotent.Transient, Key: m.ID, RetryAfter: tt.retryAfter}
				})
				w := workertest.NewWorker(t, r, h, worker.Options{Scheduler: s,
					Retry: worker.RetryOptions{MaxAttempts: 50, MaxDelay: 1000 * time.Hour}})
				ctx, cancel := context.WithCancel(context.Background())
				errc := make(chan error, 1)
				go func() { errc <- w.Run(ctx) }()
				now := time.Now()
				r.Send(&azservicebus.ReceivedMessage{MessageID: worker.RetryMessageID("m1", now, tt.attempt), DeliveryCount: 1, EnqueuedTime: &now,
					ApplicationProperties: map[string]any{worker.PropertyOriginalMessageID: "m1",
						worker.PropertyRetryAttempt: int64(tt.attempt), worker.PropertyRetrySince: now.UnixMilli()}})
				synctest.Wait()
				cancel()
				if err := <-errc; err != nil {
					t.Fatal(err)
				}
				copies := s.copies()
				if len(copies) != 1 {
					t.Fatalf("copy %d of a message with RetryAfter %v: %d copies scheduled, want 1", tt.attempt, tt.retryAfter, len(copies))
				}
				if d := copies[0].at.Sub(now); d != tt.want {
					t.Errorf("copy %d waits %v, want %v", tt.attempt+1, d, tt.want)
				}
			})
		})
	}
}

// utf16Len is the length of s in UTF-16 code units, as Service Bus
// measures a MessageId.
func utf16Len(s string) int {
	n := 0
	for _, r := range s {
		n += utf16.RuneLen(r)
	}
	return n
}

// TestRetryMessageIDUTF16: Service Bus bounds a MessageId at 128 UTF-16
// code units, so a character outside the Basic Multilingual Plane counts
// twice. A valid id of 128 units made of such characters (64 runes) used to
// give copy ids of 131 to 133 units, which Service Bus refuses.
func TestRetryMessageIDUTF16(t *testing.T) {
	emoji := strings.Repeat("😀", 64) // 128 units, 64 runes
	tests := []struct {
		original string
		attempt  int
	}{
		{emoji, 1}, {emoji, 10}, {emoji, 100},
		{strings.Repeat("a", 60) + strings.Repeat("😀", 33), 7},
		{strings.Repeat("😀", 62), 1},       // 124 units: the suffix does not fit
		{strings.Repeat("😀", 61) + "a", 9}, // 123 units + "~r9-0": kept whole
		{strings.Repeat("a", 123), 1},      // 123 + 5 = 128: kept whole
		{strings.Repeat("é", 128), 12},
	}
	since := time.UnixMilli(0) // the shortest suffix: "~r" + attempt + "-0"
	for _, tt := range tests {
		id := worker.RetryMessageID(tt.original, since, tt.attempt)
		if n := utf16Len(id); n > 128 || !utf8.ValidString(id) || id == tt.original {
			t.Errorf("RetryMessageID(%d runes, %d units; %d) = %q: %d UTF-16 units, valid %v; want at most 128, valid, not the original",
				utf8.RuneCountInString(tt.original), utf16Len(tt.original), tt.attempt, id, n, utf8.ValidString(id))
		}
		suffix := "~r" + strconv.Itoa(tt.attempt) + "-0"
		if n := utf16Len(tt.original) + len(suffix); n <= 128 && id != tt.original+suffix {
			t.Errorf("RetryMessageID(%q, %d) = %q, want the original and its suffix: %d units fit", tt.original, tt.attempt, id, n)
		}
	}
}

// FuzzRetryMessageID: for any MessageId Service Bus accepts (at most 128
// UTF-16 units), every copy id is valid UTF-8, at most 128 units, differs
// from the original, and differs between attempts.
func FuzzRetryMessageID(f *testing.F) {
	for _, s := range []string{"ord-1:v2", strings.Repeat("😀", 64), strings.Repeat("a", 126), strings.Repeat("é", 100) + "😀"} {
		f.Add(s, uint16(1))
	}
	f.Fuzz(func(t *testing.T, original string, attempt uint16) {
		if original == "" || !utf8.ValidString(original) || utf16Len(original) > 128 {
			t.Skip()
		}
		a := int(attempt%1000) + 1
		since := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
		id, next := worker.RetryMessageID(original, since, a), worker.RetryMessageID(original, since, a+1)
		for _, c := range []string{id, next} {
			if n := utf16Len(c); n > 128 || !utf8.ValidString(c) || c == original {
				t.Fatalf("RetryMessageID(%q, %d) = %q: %d UTF-16 units, valid %v", original, a, c, n, utf8.ValidString(c))
			}
		}
		if id == next {
			t.Fatalf("copies %d and %d of %q share the id %q", a, a+1, original, id)
		}
	})
}

// trialGate admits every receive as a trial of one message whose
// dependency failure waits wait: a half-open breaker's Admission.
type trialGate struct{ wait time.Duration }

func (g trialGate) Admit(ctx, rx context.Context) (context.Context, worker.Admission, bool) {
	return rx, worker.Admission{Trial: true, Max: 1, DependencyWait: g.wait}, ctx.Err() == nil
}

func (trialGate) Record(worker.Decision) {}

// TestTrialDependencyFailureWaitsOffTheHead: a delivery received under an
// Admission with DependencyWait that fails by a dependency is retried by a
// scheduled copy at least that much later, and completed, so that the
// next trial meets another message; without a Scheduler it is abandoned,
// and a failure of the message's own (not a dependency's) is abandoned
// either way.
func TestTrialDependencyFailureWaitsOffTheHead(t *testing.T) {
	const wait = 20 * time.Minute
	for _, tt := range []struct {
		name      string
		res       idempotent.Result
		scheduler bool
		want      string // the settlement
	}{
		{"dependency failure, scheduler", idempotent.Result{Outcome: idempotent.Transient, Reason: idempotent.ReasonStoreUnavailable}, true, "complete"},
		{"downstream failure, scheduler", idempotent.Result{Outcome: idempotent.Transient, Reason: "PaymentUnavailable", Dependency: true}, true, "complete"},
		{"dependency failure, no scheduler", idempotent.Result{Outcome: idempotent.Transient, Reason: idempotent.ReasonStoreUnavailable}, false, "abandon"},
		{"the message's own wait", idempotent.Result{Outcome: idempotent.Transient, Reason: "ClaimedElsewhere"}, true, "abandon"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := workertest.NewReceiver("m1")
				s := &fakeScheduler{r: r}
				o := worker.Options{Gate: trialGate{wait}}
				if tt.scheduler {
					o.Scheduler = s
				}
				h := worker.HandlerFunc(func(ctx context.Context, m idempotent.Message) idempotent.Result {
					res := tt.res
					res.Key = m.ID
					return res
				})
				w := workertest.NewWorker(t, r, h, o)
				ctx, cancel := context.WithCancel(context.Background())
				errc := make(chan error, 1)
				go func() { errc <- w.Run(ctx) }()
				start := time.Now()
				synctest.Wait()
				cancel()
				if err := <-errc; err != nil {
					t.Fatal(err)
				}
				if got := r.Settlements("m1"); len(got) == 0 || got[0].Kind != tt.want {
					t.Fatalf("settlements %+v, want %s first", got, tt.want)
				}
				copies := s.copies()
				if tt.want == "abandon" {
					if len(copies) != 0 {
						t.Errorf("scheduled %+v, want no copy", copies)
					}
					return
				}
				if len(copies) != 1 || copies[0].id != copies[0].want() || copies[0].at.Sub(start) < wait {
					t.Errorf("scheduled %+v, want one copy at least %v after the trial", copies, wait)
				}
			})
		})
	}
}

// TestCopiesOfTwoMessagesWithOneIDDiffer: two messages with one MessageId
// alive at once (a producer's retry after the duplicate-detection window,
// an operator's resubmission, an id reused for other content), each
// retried by a scheduled copy: the copies' ids differ, so duplicate
// detection drops neither. With one copy id for both, the second copy was
// dropped while its message was completed: that message was lost.
func TestCopiesOfTwoMessagesWithOneIDDiffer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := workertest.NewReceiver()
		s := &fakeScheduler{r: r}
		h := worker.HandlerFunc(func(ctx context.Context, m idempotent.Message) idempotent.Result {
			return idempotent.Result{Outcome: idempotent.Transient, Key: m.ID, RetryAfter: time.Minute}
		})
		w := workertest.NewWorker(t, r, h, worker.Options{Scheduler: s})
		ctx, cancel := context.WithCancel(context.Background())
		errc := make(chan error, 1)
		go func() { errc <- w.Run(ctx) }()
		first := time.Now()
		second := first.Add(11 * time.Minute)
		r.Send(&azservicebus.ReceivedMessage{MessageID: "ord-7", Body: []byte("a"), DeliveryCount: 1, EnqueuedTime: &first})
		r.Send(&azservicebus.ReceivedMessage{MessageID: "ord-7", Body: []byte("b"), DeliveryCount: 1, EnqueuedTime: &second})
		synctest.Wait()
		cancel()
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
		copies := s.copies()
		if len(copies) != 2 || copies[0].id == copies[1].id {
			t.Fatalf("scheduled %+v, want two copies with different ids", copies)
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		if len(s.seen) != 2 {
			t.Errorf("%d copies passed duplicate detection, want both", len(s.seen))
		}
	})
}

// TestRetryCopyOfTheEarlierScheme: a copy named by the earlier scheme
// (original + "~r" + attempt, without the enqueue time), as a worker from
// before the change scheduled it, is still taken for a copy and handled
// under its original's MessageId, so that an upgrade while copies wait
// loses none of them.
func TestRetryCopyOfTheEarlierScheme(t *testing.T) {
	since := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	props := map[string]any{worker.PropertyOriginalMessageID: "ord-1", worker.PropertyRetryAttempt: int64(2), worker.PropertyRetrySince: since.UnixMilli()}
	for _, id := range []string{"ord-1~r2", worker.RetryMessageID("ord-1", since, 2)} {
		c, ok := worker.RetryCopyOf(&azservicebus.ReceivedMessage{MessageID: id, ApplicationProperties: props})
		if !ok || c.OriginalMessageID != "ord-1" || c.Attempt != 2 || !c.Since.Equal(since) {
			t.Errorf("RetryCopyOf(%q) = %+v, %v; want copy 2 of ord-1 since %v", id, c, ok, since)
		}
	}
	if _, ok := worker.RetryCopyOf(&azservicebus.ReceivedMessage{MessageID: "ord-1~r3", ApplicationProperties: props}); ok {
		t.Error(`RetryCopyOf("ord-1~r3") with attempt 2 is a copy; want none: its id is not that of its properties`)
	}
}

package worker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"math"
	"strconv"
	"time"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/idempotent-consumer/sbcosmos/idempotent"
)

// Scheduler is the part of *azservicebus.Sender the worker uses for delayed
// retries: a sender on the queue the worker receives from. It is called
// concurrently from the handlers' goroutines, as the SDK's sender allows.
type Scheduler interface {
	ScheduleMessages(ctx context.Context, messages []*azservicebus.Message, scheduledEnqueueTime time.Time, o *azservicebus.ScheduleMessagesOptions) ([]int64, error)
}

var _ Scheduler = (*azservicebus.Sender)(nil)

// RetryOptions bound the delayed retries of one message (see Options.Retry).
// The zero value of each field selects its default.
type RetryOptions struct {
	// MaxAttempts bounds the scheduled copies of one message. Default 10.
	MaxAttempts int
	// MaxDelay bounds the total delay: no copy is scheduled to be enqueued
	// later than MaxDelay after the original message was enqueued.
	// Default 1h.
	MaxDelay time.Duration
}

// Application properties of a scheduled copy. The copy's MessageId is
// RetryMessageID(original, since, attempt); a message whose MessageId is not that
// of its properties is not taken for a copy.
const (
	// PropertyOriginalMessageID is the MessageId of the message the copy
	// retries: the id the handler sees, the deduplication key.
	PropertyOriginalMessageID = "OriginalMessageId"
	// PropertyRetryAttempt is the copy's attempt, 1 for the first copy (an
	// int64).
	PropertyRetryAttempt = "RetryAttempt"
	// PropertyRetrySince is when the original message was enqueued, in Unix
	// milliseconds (an int64): where RetryOptions.MaxDelay counts from.
	PropertyRetrySince = "RetrySince"
)

// maxMessageIDLength is the longest MessageId Service Bus accepts, in
// UTF-16 code units. The documentation says "characters"; the service and
// its reference SDK are .NET, whose string length counts UTF-16 code units,
// so a character outside the Basic Multilingual Plane counts twice. That is
// inferred, not documented: counting units is the reading under which every
// id the worker builds is accepted either way.
const maxMessageIDLength = 128

// utf16Len returns the length of s in UTF-16 code units. A byte that is not
// valid UTF-8 counts as one unit, as the U+FFFD it decodes to (an upper
// bound: a decoder may replace a longer invalid sequence with one U+FFFD).
func utf16Len(s string) int {
	n := 0
	for _, r := range s {
		n += utf16.RuneLen(r)
	}
	return n
}

// RetryMessageID returns the MessageId of the attempt-th scheduled copy of
// the message whose MessageId is original, enqueued at since (its
// PropertyRetrySince): original + "~r" + attempt + "-" + since in Unix
// milliseconds in base 36, or, when that would exceed Service Bus's 128
// UTF-16 code units, a prefix of original (whole characters), "~", 16 hex
// digits of the SHA-256 of original, and the same suffix. It differs from
// original and from every other copy's id, so duplicate detection drops
// only a second scheduling of the same copy. The enqueue time tells apart
// two messages with one MessageId that are both alive (a producer's retry
// after the duplicate-detection window, an operator's resubmission, an id
// reused for other content): with the same copy ids, duplicate detection
// would drop the copy of the second, which its worker completes, and lose
// it. It can equal a producer's own MessageId only if the producer uses
// '~' in its ids.
func RetryMessageID(original string, since time.Time, attempt int) string {
	return withSuffix(original, "~r"+strconv.Itoa(attempt)+"-"+strconv.FormatInt(since.UnixMilli(), 36))
}

// legacyRetryMessageID is the MessageId a copy had before it carried its
// original's enqueue time: original + "~r" + attempt, shortened as
// RetryMessageID's. RetryCopyOf still recognises it, so that the copies a
// worker of the earlier scheme scheduled are handled as copies after an
// upgrade.
func legacyRetryMessageID(original string, attempt int) string {
	return withSuffix(original, "~r"+strconv.Itoa(attempt))
}

// withSuffix returns original + suffix, or, when that would exceed
// maxMessageIDLength UTF-16 code units, a prefix of original (whole
// characters), "~", 16 hex digits of the SHA-256 of original, and suffix.
func withSuffix(original, suffix string) string {
	if utf16Len(original)+len(suffix) <= maxMessageIDLength {
		return original + suffix
	}
	sum := sha256.Sum256([]byte(original))
	tag := "~" + hex.EncodeToString(sum[:8])
	keep := maxMessageIDLength - len(suffix) - len(tag)
	cut := 0
	for cut < len(original) { // whole characters, counted in UTF-16 units
		r, size := utf8.DecodeRuneInString(original[cut:])
		n := utf16.RuneLen(r)
		if n > keep {
			break
		}
		keep -= n
		cut += size
	}
	return original[:cut] + tag + suffix
}

// retryState is what a delivery says about its delayed retries.
type retryState struct {
	original string    // the deduplication key: the original's MessageId
	attempt  int       // 0 for an original, n for the n-th copy
	since    time.Time // when the original was enqueued
}

// RetryCopy is what a delayed-retry copy the worker scheduled says about
// the message it retries (see RetryCopyOf).
type RetryCopy struct {
	// OriginalMessageID is the original's MessageId: the deduplication key.
	OriginalMessageID string
	// Attempt is the copy's attempt, 1 for the first copy.
	Attempt int
	// Since is when the original was enqueued, where RetryOptions.MaxDelay
	// counts from.
	Since time.Time
}

// RetryCopyOf reports whether m is a delayed-retry copy the worker
// scheduled, by the worker's own test: its three retry properties are
// present and its MessageId is RetryMessageID of them (or the earlier
// scheme's original + "~r" + attempt, which the copies of a worker from
// before RetryMessageID carried the enqueue time still have). A message
// that merely carries the properties is no copy. A tool that handles
// dead-lettered copies (orderctl dlq) uses it to tell them as the worker
// does.
func RetryCopyOf(m *azservicebus.ReceivedMessage) (RetryCopy, bool) {
	orig, ok1 := m.ApplicationProperties[PropertyOriginalMessageID].(string)
	attempt, ok2 := asInt64(m.ApplicationProperties[PropertyRetryAttempt])
	since, ok3 := asInt64(m.ApplicationProperties[PropertyRetrySince])
	if !ok1 || !ok2 || !ok3 || attempt <= 0 || attempt >= 1<<20 || orig == "" ||
		m.MessageID != RetryMessageID(orig, time.UnixMilli(since), int(attempt)) && m.MessageID != legacyRetryMessageID(orig, int(attempt)) {
		return RetryCopy{}, false
	}
	return RetryCopy{OriginalMessageID: orig, Attempt: int(attempt), Since: time.UnixMilli(since)}, true
}

// retryStateOf reads m's retry state: from its properties when it is a
// scheduled copy (RetryCopyOf), else that of an original enqueued at
// m.EnqueuedTime (now when unknown).
func retryStateOf(m *azservicebus.ReceivedMessage, now time.Time) retryState {
	if c, ok := RetryCopyOf(m); ok {
		return retryState{original: c.OriginalMessageID, attempt: c.Attempt, since: c.Since}
	}
	st := retryState{original: m.MessageID, since: now}
	if m.EnqueuedTime != nil {
		st.since = *m.EnqueuedTime
	}
	return st
}

func asInt64(v any) (int64, bool) {
	switch n := v.(type) {
	case int64:
		return n, true
	case int32:
		return int64(n), true
	case int:
		return int64(n), true
	}
	return 0, false
}

// retryPlan is a delayed retry decided for one delivery.
type retryPlan struct {
	state   retryState
	attempt int           // the copy's attempt
	delay   time.Duration // from now to the copy's enqueue
}

// planRetry decides whether res for delivery m (in state st) is retried by
// a scheduled copy: the outcome settles by an abandon (Transient) with
// RetryAfter set, or it failed by a dependency in a receive whose
// Admission set DependencyWait (wait), the worker has a Scheduler, and
// the bounds allow another copy. The copy waits RetryAfter doubled per
// earlier copy, or wait if longer, cut to what MaxDelay leaves. It returns
// nil for an abandon.
func (w *Worker) planRetry(st retryState, res idempotent.Result, now time.Time, wait time.Duration) *retryPlan {
	after := doubled(res.RetryAfter, st.attempt)
	if wait > 0 && res.DependencyFailed() {
		after = max(after, wait)
	}
	if w.opts.Scheduler == nil || res.Outcome.Settlement() != idempotent.Abandon || after <= 0 {
		return nil
	}
	ro := w.opts.Retry
	if st.attempt >= ro.MaxAttempts {
		return nil
	}
	left := st.since.Add(ro.MaxDelay).Sub(now)
	delay := min(after, left)
	if delay <= 0 {
		return nil
	}
	return &retryPlan{state: st, attempt: st.attempt + 1, delay: delay}
}

// doubled returns d doubled n times, saturated at the longest Duration: a
// shift that overflowed would give a negative delay, which planRetry would
// take for "no delay left".
func doubled(d time.Duration, n int) time.Duration {
	for ; n > 0 && d > 0; n-- {
		if d > math.MaxInt64/2 {
			return math.MaxInt64
		}
		d *= 2
	}
	return d
}

// wantsRetry reports whether res asks for a delayed retry and the
// worker has a Scheduler; a delivery that asks for one and has no
// retryPlan was refused by the bounds: the message is abandoned and
// MaxDeliveryCount ends it.
func (w *Worker) wantsRetry(res idempotent.Result) bool {
	return w.opts.Scheduler != nil && res.Outcome.Settlement() == idempotent.Abandon && res.RetryAfter > 0
}

// scheduleRetry schedules the copy p plans of m, enqueued p.delay from now.
// A copy scheduled twice (this delivery's settlement failed after the
// scheduling and a redelivery scheduled again) has the same MessageId, so
// duplicate detection drops the second; outside its window both copies
// arrive, and the handler's idempotency absorbs the second.
func (w *Worker) scheduleRetry(ctx context.Context, m *azservicebus.ReceivedMessage, p *retryPlan) error {
	props := maps.Clone(m.ApplicationProperties)
	if props == nil {
		props = make(map[string]any, 3)
	}
	props[PropertyOriginalMessageID] = p.state.original
	props[PropertyRetryAttempt] = int64(p.attempt)
	props[PropertyRetrySince] = p.state.since.UnixMilli()
	id := RetryMessageID(p.state.original, p.state.since, p.attempt)
	c := &azservicebus.Message{
		MessageID:             &id,
		Body:                  m.Body,
		ApplicationProperties: props,
		ContentType:           m.ContentType,
		CorrelationID:         m.CorrelationID,
		Subject:               m.Subject,
		To:                    m.To,
		ReplyTo:               m.ReplyTo,
		ReplyToSessionID:      m.ReplyToSessionID,
		SessionID:             m.SessionID,
		PartitionKey:          m.PartitionKey,
		TimeToLive:            m.TimeToLive,
	}
	if _, err := w.opts.Scheduler.ScheduleMessages(ctx, []*azservicebus.Message{c}, time.Now().Add(p.delay), nil); err != nil {
		return fmt.Errorf("schedule retry %d as %s: %w", p.attempt, id, err)
	}
	return nil
}

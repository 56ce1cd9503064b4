package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/idempotent-consumer/sbcosmos/internal/cli"
	"github.com/idempotent-consumer/sbcosmos/order"
	"github.com/idempotent-consumer/sbcosmos/worker"
)

// Application properties orderctl sets on a resubmission, besides those it
// copies: the enqueue time of the first copy it resubmitted (kept across
// resubmissions, so that the resubmission horizon is counted from it), and
// how often the message was resubmitted.
const (
	PropOriginalEnqueuedTime = "OriginalEnqueuedTime"
	PropResubmissionCount    = "ResubmissionCount"
)

// The dead-letter properties Service Bus sets, removed from a resubmission.
const (
	propDeadLetterReason      = "DeadLetterReason"
	propDeadLetterDescription = "DeadLetterErrorDescription"
)

// peekPage is how many messages one peek asks for.
const peekPage = 100

// maxReceive is the most messages one receive asks for (the SDK's limit).
const maxReceive = 5000

// idleWait is how long a receive pass waits for the dead-letter queue to
// deliver another message before it concludes that nothing more is
// available.
const idleWait = 3 * time.Second

// dlq is the dead-letter queue of one queue, and the queue; or, with topic
// and subscription set, that of one subscription of a topic (to which
// nothing is resubmitted: a topic copies what it is sent to every
// subscription).
type dlq struct {
	client              *azservicebus.Client
	queue               string
	topic, subscription string
	namespace, connStr  string // for the settings an error names
	now                 func() time.Time
}

func (d *dlq) name() string {
	if d.subscription != "" {
		return d.topic + "/Subscriptions/" + d.subscription + "/$DeadLetterQueue"
	}
	return d.queue + "/$DeadLetterQueue"
}

// explain names the setting to fix in err, a failure of a call on the
// dead-letter queue (cli.ExplainServiceBus).
func (d *dlq) explain(err error) error {
	if d.subscription != "" {
		return cli.ExplainServiceBus(err, d.namespace, d.connStr, fmt.Sprintf("subscription %q of topic %q", d.subscription, d.topic), cli.SubscriptionSettings)
	}
	return cli.ExplainServiceBus(err, d.namespace, d.connStr, fmt.Sprintf("queue %q", d.queue), cli.QueueSetting)
}

// receiver returns a PeekLock receiver on the dead-letter queue.
func (d *dlq) receiver() (*azservicebus.Receiver, error) {
	opts := &azservicebus.ReceiverOptions{SubQueue: azservicebus.SubQueueDeadLetter}
	var r *azservicebus.Receiver
	var err error
	if d.subscription != "" {
		r, err = d.client.NewReceiverForSubscription(d.topic, d.subscription, opts)
	} else {
		r, err = d.client.NewReceiverForQueue(d.queue, opts)
	}
	if err != nil {
		return nil, fmt.Errorf("receiver for %s: %w", d.name(), err)
	}
	return r, nil
}

// peekAll returns every message in the dead-letter queue, without locking
// any, in sequence-number order: PeekMessages pages through from sequence
// number 0. Messages another receiver holds locked are included, as
// Service Bus peeks them too.
func (d *dlq) peekAll(ctx context.Context) ([]*azservicebus.ReceivedMessage, error) {
	r, err := d.receiver()
	if err != nil {
		return nil, err
	}
	defer closeBounded(r.Close)
	var all []*azservicebus.ReceivedMessage
	from := int64(0)
	for {
		page, err := r.PeekMessages(ctx, peekPage, &azservicebus.PeekMessagesOptions{FromSequenceNumber: &from})
		if err != nil {
			return nil, fmt.Errorf("peek %s: %w", d.name(), d.explain(err))
		}
		if len(page) == 0 {
			return all, nil
		}
		all = append(all, page...)
		from = *page[len(page)-1].SequenceNumber + 1
	}
}

// closeBounded closes a Service Bus object within 10 seconds.
func closeBounded(closeFn func(context.Context) error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	closeFn(ctx)
}

// reasonOf returns a dead-letter copy's reason, "(none)" when it has none.
func reasonOf(m *azservicebus.ReceivedMessage) string {
	if m.DeadLetterReason != nil && *m.DeadLetterReason != "" {
		return *m.DeadLetterReason
	}
	return "(none)"
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func enqueued(m *azservicebus.ReceivedMessage) time.Time {
	if m.EnqueuedTime == nil {
		return time.Time{}
	}
	return *m.EnqueuedTime
}

func seq(m *azservicebus.ReceivedMessage) int64 {
	if m.SequenceNumber == nil {
		return 0
	}
	return *m.SequenceNumber
}

// ageBuckets are the age classes of dlq list.
var ageBuckets = []struct {
	label string
	below time.Duration
}{{"<1h", time.Hour}, {"1h-1d", 24 * time.Hour}, {"1d-7d", 7 * 24 * time.Hour}, {">=7d", 1<<63 - 1}}

// list prints the counts by reason and age, and the oldest and newest
// message of each reason.
func (d *dlq) list(ctx context.Context, w io.Writer) error {
	msgs, err := d.peekAll(ctx)
	if err != nil {
		return err
	}
	now := d.now()
	fmt.Fprintf(w, "%s: %d messages (ages since they were enqueued)\n", d.name(), len(msgs))
	if len(msgs) == 0 {
		return nil
	}
	type group struct {
		n              int
		ages           []int
		oldest, newest *azservicebus.ReceivedMessage
	}
	groups := map[string]*group{}
	for _, m := range msgs {
		g := groups[reasonOf(m)]
		if g == nil {
			g = &group{ages: make([]int, len(ageBuckets))}
			groups[reasonOf(m)] = g
		}
		g.n++
		age := now.Sub(enqueued(m))
		for i, b := range ageBuckets {
			if age < b.below {
				g.ages[i]++
				break
			}
		}
		if g.oldest == nil || enqueued(m).Before(enqueued(g.oldest)) {
			g.oldest = m
		}
		if g.newest == nil || !enqueued(m).Before(enqueued(g.newest)) {
			g.newest = m
		}
	}
	reasons := slices.SortedFunc(maps.Keys(groups), func(a, b string) int {
		return cmp.Or(groups[b].n-groups[a].n, strings.Compare(a, b))
	})
	fmt.Fprintf(w, "%-28s %6s", "REASON", "COUNT")
	for _, b := range ageBuckets {
		fmt.Fprintf(w, " %6s", b.label)
	}
	fmt.Fprintf(w, "  %-40s %s\n", "OLDEST", "NEWEST")
	for _, r := range reasons {
		g := groups[r]
		fmt.Fprintf(w, "%-28s %6d", r, g.n)
		for _, n := range g.ages {
			fmt.Fprintf(w, " %6d", n)
		}
		fmt.Fprintf(w, "  %-40s %s\n", describeAge(g.oldest, now), describeAge(g.newest, now))
	}
	return nil
}

func describeAge(m *azservicebus.ReceivedMessage, now time.Time) string {
	return fmt.Sprintf("%s (%s ago)", m.MessageID, cli.FormatDuration(now.Sub(enqueued(m)).Round(time.Second)))
}

// selector decides which messages resubmit and purge apply to.
type selector struct {
	ids       map[string]bool
	reason    string
	all       bool
	olderThan time.Duration
}

func newSelector(c config) selector {
	s := selector{reason: c.Reason, all: c.All, olderThan: c.OlderThan}
	if len(c.IDs) > 0 {
		s.ids = map[string]bool{}
		for _, id := range c.IDs {
			s.ids[id] = true
		}
	}
	return s
}

func (s selector) match(m *azservicebus.ReceivedMessage, now time.Time) bool {
	switch {
	case s.all:
		return true
	case s.ids != nil:
		// A delayed-retry copy is selected by its own id or its original's.
		return s.ids[m.MessageID] || s.ids[sendID(m)]
	}
	if s.reason != "" && deref(m.DeadLetterReason) != s.reason {
		return false
	}
	if s.olderThan > 0 && now.Sub(enqueued(m)) <= s.olderThan {
		return false
	}
	return s.reason != "" || s.olderThan > 0
}

// lockTargets receives from the dead-letter queue (PeekLock) until it holds
// every message whose sequence number is in targets, or the queue delivers
// nothing more within idleWait. Service Bus cannot lock a message by id or
// sequence number, so the messages received on the way are held too and
// returned as others, to be abandoned once the work is done (abandoning
// them at once would have them delivered again in the same pass). Each
// abandon raises its message's delivery count in the dead-letter queue,
// where the count has no effect. All locks must be used within the lock
// duration.
//
// Each receive asks for as many messages as the peek counted and the pass
// has not received yet (total): a receive that returns fewer than it asked
// for leaves link credit, on which the broker sends whatever becomes
// available, such as the messages abandoned at the end, and the SDK can
// only release those (uncounted) while the receiver is open; one it has not
// released when the receiver closes stays locked for the lock duration. So
// the normal pass, which receives what the peek counted, ends with no
// credit left; only a pass that misses messages (locked by another
// receiver) waits idleWait and leaves some.
func lockTargets(ctx context.Context, r *azservicebus.Receiver, targets map[int64]bool, total int) (got map[int64]*azservicebus.ReceivedMessage, others []*azservicebus.ReceivedMessage, err error) {
	got = map[int64]*azservicebus.ReceivedMessage{}
	for len(got) < len(targets) {
		rctx, cancel := context.WithTimeout(ctx, idleWait)
		n := min(max(total-len(got)-len(others), 1), maxReceive)
		msgs, err := r.ReceiveMessages(rctx, n, nil)
		idle := rctx.Err() != nil && ctx.Err() == nil
		cancel()
		for _, m := range msgs {
			// A message held on the way whose lock lapsed can come back:
			// it is held again, and abandoned again at the end.
			if s := seq(m); targets[s] && got[s] == nil {
				got[s] = m
			} else {
				others = append(others, m)
			}
		}
		if err != nil && !idle {
			return got, others, fmt.Errorf("receive from the dead-letter queue: %w", err)
		}
		if len(msgs) == 0 && idle {
			break
		}
	}
	return got, others, nil
}

// abandonAll gives the messages lockTargets held on the way back.
func abandonAll(r *azservicebus.Receiver, msgs []*azservicebus.ReceivedMessage) error {
	var errs []error
	for _, m := range msgs {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		if err := r.AbandonMessage(ctx, m, nil); err != nil {
			errs = append(errs, fmt.Errorf("abandon %s (seq %d): %w", m.MessageID, seq(m), err))
		}
		cancel()
	}
	return errors.Join(errs...)
}

// plan is what resubmit or purge decided for one dead-letter copy.
type plan struct {
	m       *azservicebus.ReceivedMessage
	refused []string // why not, each with the flag that overrides it
	warn    []string // forced past a refusal
}

func (p plan) label() string {
	var copyOf string
	if rc, ok := worker.RetryCopyOf(p.m); ok {
		copyOf = fmt.Sprintf(", delayed-retry copy %d of %s", rc.Attempt, rc.OriginalMessageID)
	}
	return fmt.Sprintf("%s (seq %d, %s, enqueued %s%s)", p.m.MessageID, seq(p.m), reasonOf(p.m), enqueued(p.m).UTC().Format(time.RFC3339), copyOf)
}

// sendID is the MessageId a resubmission of m carries: the original's for a
// delayed-retry copy (see resubmission), else m's own.
func sendID(m *azservicebus.ReceivedMessage) string {
	if rc, ok := worker.RetryCopyOf(m); ok {
		return rc.OriginalMessageID
	}
	return m.MessageID
}

// firstEnqueued returns when the first copy of m entered the queue: the
// OriginalEnqueuedTime an earlier resubmission recorded, else for a
// delayed-retry copy the original's enqueue time (its RetrySince), else m's
// own enqueue time (Service Bus keeps a dead-lettered message's enqueue
// time).
func firstEnqueued(m *azservicebus.ReceivedMessage) time.Time {
	if v, ok := m.ApplicationProperties[PropOriginalEnqueuedTime]; ok {
		switch v := v.(type) {
		case time.Time:
			return v
		case string:
			if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
				return t
			}
		}
	}
	if rc, ok := worker.RetryCopyOf(m); ok {
		return rc.Since
	}
	return enqueued(m)
}

// resubmitPlan decides whether m may be resubmitted now.
//
// The duplicate-detection window: Service Bus drops a message whose
// MessageId was enqueued less than the window ago, silently (the send
// succeeds). m's enqueue time is the latest one orderctl can know; a later
// copy of the same id, such as a producer retry, extends the window
// further, and the broker would drop that resubmission too.
//
// The resubmission horizon: the worker's retention check (order.
// RedeliveryHorizon.MinRetention) keeps deduplication markers long enough
// for a resubmission made within the horizon H after a copy was
// dead-lettered, which happens at the latest T + 2D after it was enqueued
// (message TTL T, lock duration D). A later resubmission may reach a worker
// that has forgotten the message (an inbox marker past its TTL, a payment
// key the payments service no longer remembers) and be processed twice.
// With the inbox variant, the markers' TTL bounds it directly as well: the
// resubmission may be delivered up to T after it is sent.
//
// A delayed-retry copy is resubmitted under its original's MessageId
// (resubmission), which was last enqueued no later than the copy: the
// window counted from the copy's enqueue covers it.
//
// A copy dead-lettered as OrderIdReused is sent (an operator may have fixed
// the stored order), with a warning: unchanged, it meets the same stored
// order and is dead-lettered again.
func (c *config) resubmitPlan(m *azservicebus.ReceivedMessage, now time.Time) plan {
	p := plan{m: m}
	// Such a copy cannot come from Service Bus, which refuses the id, but
	// can from a broker that accepted it; sent, it would fail only after
	// the SDK's retries, as "context deadline exceeded".
	if err := cli.CheckMessageID(sendID(m)); err != nil {
		p.refused = append(p.refused, fmt.Sprintf("%v, so it cannot be resubmitted: purge it (`orderctl dlq purge <MessageId> -yes`) and send its content under a shorter id", err))
	}
	if reasonOf(m) == order.ReasonOrderIDReused {
		p.warn = append(p.warn, fmt.Sprintf("dead-lettered as %s: an order with this id and other content is stored, so the worker dead-letters the resubmission again unchanged; "+
			"`orderctl dlq show %s` shows the difference: if this content is a new order, send it under a new order id and purge this copy (`orderctl dlq purge %s -yes`)",
			order.ReasonOrderIDReused, m.MessageID, m.MessageID))
	}
	windowEnd := enqueued(m).Add(c.DuplicateWindow)
	if now.Before(windowEnd) {
		why := fmt.Sprintf("inside the duplicate-detection window %s until %s (%s from now): the broker would silently drop the resubmission",
			cli.FormatDuration(c.DuplicateWindow), windowEnd.UTC().Format(time.RFC3339), cli.FormatDuration(windowEnd.Sub(now).Round(time.Second)))
		if c.ForceWindow {
			p.warn = append(p.warn, why+"; -force-window: sending anyway, and the dead-letter copy is then completed: the message is LOST if the broker drops it")
		} else {
			p.refused = append(p.refused, why+" (wait, or -force-window)")
		}
	}
	first := firstEnqueued(m)
	var deadline time.Time
	var basis string
	if t := c.MessageTTL; t > 0 {
		deadline = first.Add(t + 2*c.LockDuration + c.ResubmissionHorizon)
		basis = fmt.Sprintf("first enqueued %s + message TTL %s + 2 × lock duration %s + resubmission horizon %s",
			first.UTC().Format(time.RFC3339), cli.FormatDuration(t), cli.FormatDuration(c.LockDuration), cli.FormatDuration(c.ResubmissionHorizon))
	}
	if c.InboxConsumer != "" {
		if d := first.Add(c.InboxTTL - c.MessageTTL); deadline.IsZero() || d.Before(deadline) {
			deadline = d
			basis = fmt.Sprintf("first enqueued %s + inbox marker TTL %s - message TTL %s (consumer %q)",
				first.UTC().Format(time.RFC3339), cli.FormatDuration(c.InboxTTL), cli.FormatDuration(c.MessageTTL), c.InboxConsumer)
		}
	}
	if !deadline.IsZero() && now.After(deadline) {
		why := fmt.Sprintf("past the resubmission horizon since %s (%s): the worker may have forgotten it and process it again", deadline.UTC().Format(time.RFC3339), basis)
		if c.Force {
			p.warn = append(p.warn, why+"; -force: sending anyway")
		} else {
			p.refused = append(p.refused, why+" (-force to send anyway)")
		}
	}
	return p
}

// resubmission returns the message to send for dead-letter copy m: the same
// MessageId, body, subject, content type, correlation id, time-to-live and
// application properties, without the dead-letter reason and description,
// with OriginalEnqueuedTime (when the first copy was enqueued:
// firstEnqueued) and ResubmissionCount set.
//
// A delayed-retry copy (retryCopyOf) is resubmitted as the original
// message: under the original's MessageId, without the worker's retry
// properties. Kept, they would make the worker take the resubmission for
// the same copy of an old message, whose retry budget (attempts, and the
// total delay counted from the original's enqueue) is spent, so a transient
// failure would get no delayed retry; and its id would be the copy's, not
// the deduplication key the handler sees. As an original it starts a
// budget of its own, as any other resubmission does; the handler
// deduplicates it by the original's id as before.
func resubmission(m *azservicebus.ReceivedMessage) *azservicebus.Message {
	out := m.Message()
	props := make(map[string]any, len(m.ApplicationProperties)+2)
	maps.Copy(props, m.ApplicationProperties) // Message() shares the map
	delete(props, propDeadLetterReason)
	delete(props, propDeadLetterDescription)
	id := m.MessageID
	if rc, ok := worker.RetryCopyOf(m); ok {
		id = rc.OriginalMessageID
		delete(props, worker.PropertyOriginalMessageID)
		delete(props, worker.PropertyRetryAttempt)
		delete(props, worker.PropertyRetrySince)
	}
	if _, ok := props[PropOriginalEnqueuedTime]; !ok {
		props[PropOriginalEnqueuedTime] = firstEnqueued(m).UTC().Format(time.RFC3339Nano)
	}
	n := int64(0)
	switch v := props[PropResubmissionCount].(type) {
	case int64:
		n = v
	case int32:
		n = int64(v)
	case int:
		n = int64(v)
	}
	props[PropResubmissionCount] = n + 1
	out.ApplicationProperties = props
	out.MessageID = &id
	out.ScheduledEnqueueTime = nil
	return out
}

// describeSent says exactly what a resubmission carries.
func describeSent(queue string, msg *azservicebus.Message) string {
	keys := slices.Sorted(maps.Keys(msg.ApplicationProperties))
	var props []string
	for _, k := range keys {
		props = append(props, fmt.Sprintf("%s=%v", k, msg.ApplicationProperties[k]))
	}
	return fmt.Sprintf("to %s: MessageId %s, %d-byte body, subject %q, content type %q, properties {%s}",
		queue, deref(msg.MessageID), len(msg.Body), deref(msg.Subject), deref(msg.ContentType), strings.Join(props, ", "))
}

// act runs resubmit or purge: it peeks to select and plan, prints the plan,
// and with -yes locks the selected copies and acts on them. It returns an
// error when anything was refused or failed, so that scripts notice.
func (d *dlq) act(ctx context.Context, c config, w io.Writer) error {
	msgs, err := d.peekAll(ctx)
	if err != nil {
		return err
	}
	now := d.now()
	sel := newSelector(c)
	var plans []plan
	resubmitting := map[string]bool{}
	for _, m := range msgs {
		if !sel.match(m, now) {
			continue
		}
		p := plan{m: m}
		if c.Verb == "resubmit" {
			p = c.resubmitPlan(m, now)
			if resubmitting[sendID(m)] {
				// The first copy's send starts the window again.
				p.refused = append(p.refused, "another copy of this MessageId is resubmitted in this pass, and the broker would drop this one as its duplicate: purge it, or resubmit it after the window")
			} else if len(p.refused) == 0 {
				resubmitting[sendID(m)] = true
			}
		}
		plans = append(plans, p)
	}
	found := map[string]bool{}
	for _, p := range plans {
		found[p.m.MessageID] = true
		found[sendID(p.m)] = true
	}
	var missing []string
	for _, id := range c.IDs {
		if !found[id] {
			missing = append(missing, id)
		}
	}
	verb := c.Verb
	mode := "dry run (add -yes to act)"
	if c.Yes {
		mode = "acting"
	}
	fmt.Fprintf(w, "%s %s: %d of %d messages selected; %s\n", verb, d.name(), len(plans), len(msgs), mode)
	targets := map[int64]bool{}
	refused := 0
	for _, p := range plans {
		if len(p.refused) > 0 {
			refused++
			fmt.Fprintf(w, "refused %s: %s\n", p.label(), strings.Join(p.refused, "; "))
			continue
		}
		for _, warn := range p.warn {
			fmt.Fprintf(w, "WARNING %s: %s\n", p.label(), warn)
		}
		if !c.Yes {
			fmt.Fprintf(w, "would %s %s\n", verb, p.label())
		}
		targets[seq(p.m)] = true
	}
	for _, id := range missing {
		fmt.Fprintf(w, "not found: no message %s in %s\n", id, d.name())
	}
	var errs []error
	if refused > 0 {
		errs = append(errs, fmt.Errorf("%d messages refused", refused))
	}
	if len(missing) > 0 {
		errs = append(errs, fmt.Errorf("%d message ids not found", len(missing)))
	}
	if !c.Yes || len(targets) == 0 {
		return errors.Join(errs...)
	}
	done, err := d.apply(ctx, c, targets, len(msgs), w)
	fmt.Fprintf(w, "%s %d of %d\n", map[string]string{"resubmit": "resubmitted", "purge": "purged"}[c.Verb], done, len(targets))
	return errors.Join(append(errs, err)...)
}

// apply locks the target copies (of total in the dead-letter queue) and resubmits or purges each: for a
// resubmission it sends first and completes the dead-letter copy after.
// A failure between the two leaves the copy in the dead-letter queue as
// well as the resubmission in the queue: a duplicate, which the worker's
// idempotency absorbs. The other order could lose the message: completed,
// then not sent. Before each send it renews the copy's lock, and sends
// nothing for a copy whose lock lapsed while the pass held the others.
func (d *dlq) apply(ctx context.Context, c config, targets map[int64]bool, total int, w io.Writer) (int, error) {
	if c.Verb == "resubmit" && d.subscription != "" {
		// Validate refuses it; this is the last line of defence.
		return 0, fmt.Errorf("resubmit to %s: refused on a subscription's dead-letter queue", d.name())
	}
	r, err := d.receiver()
	if err != nil {
		return 0, err
	}
	defer closeBounded(r.Close)
	var sender *azservicebus.Sender
	if c.Verb == "resubmit" {
		if sender, err = d.client.NewSender(d.queue, nil); err != nil {
			return 0, fmt.Errorf("sender for %s: %w", d.queue, err)
		}
		defer closeBounded(sender.Close)
	}
	got, others, err := lockTargets(ctx, r, targets, total)
	defer func() {
		if aerr := abandonAll(r, others); aerr != nil {
			fmt.Fprintf(w, "warning: giving back messages received on the way: %v\n", aerr)
		}
	}()
	var errs []error
	if err != nil {
		errs = append(errs, err)
	}
	for s := range targets {
		if got[s] == nil {
			errs = append(errs, fmt.Errorf("sequence number %d: no longer in %s, or not delivered to this receiver (locked by another?)", s, d.name()))
		}
	}
	done := 0
	for _, s := range slices.Sorted(maps.Keys(got)) {
		m := got[s]
		label := plan{m: m}.label()
		if c.Verb == "resubmit" {
			// The received copy decides, not the peeked one.
			if p := c.resubmitPlan(m, d.now()); len(p.refused) > 0 {
				fmt.Fprintf(w, "refused %s: %s\n", label, strings.Join(p.refused, "; "))
				others = append(others, m)
				errs = append(errs, fmt.Errorf("%s refused", m.MessageID))
				continue
			}
			// Every copy was received before the first is sent, so on a
			// large dead-letter queue the pass can outlive the lock
			// duration. Renew first: a copy whose lock lapsed is not sent,
			// since its complete would fail and leave it in the dead-letter
			// queue as well as its resubmission in the queue.
			rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			err := r.RenewMessageLock(rctx, m, nil)
			cancel()
			if err != nil {
				fmt.Fprintf(w, "NOT SENT %s: its lock could not be renewed (%v), so its dead-letter copy could not be completed after the send; it stays in %s: run the resubmit again\n", label, err, d.name())
				errs = append(errs, fmt.Errorf("renew the lock of %s: %w", m.MessageID, err))
				continue
			}
			msg := resubmission(m)
			sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			err = sender.SendMessage(sctx, msg, nil)
			cancel()
			if err != nil {
				fmt.Fprintf(w, "FAILED to send %s: %v; its dead-letter copy is kept\n", label, err)
				others = append(others, m)
				errs = append(errs, fmt.Errorf("send %s: %w", m.MessageID, err))
				continue
			}
			fmt.Fprintf(w, "sent %s %s\n", label, describeSent(d.queue, msg))
		}
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err := r.CompleteMessage(cctx, m, nil)
		cancel()
		if err != nil {
			if c.Verb == "resubmit" {
				fmt.Fprintf(w, "FAILED to complete the dead-letter copy of %s after sending it: %v; the copy stays in %s (a duplicate of what was sent, which the worker's idempotency absorbs): purge it\n", label, err, d.name())
			} else {
				fmt.Fprintf(w, "FAILED to purge %s: %v\n", label, err)
			}
			errs = append(errs, fmt.Errorf("complete %s: %w", m.MessageID, err))
			continue
		}
		if c.Verb == "resubmit" {
			fmt.Fprintf(w, "completed the dead-letter copy of %s\n", label)
		} else {
			fmt.Fprintf(w, "purged %s\n", label)
		}
		done++
	}
	return done, errors.Join(errs...)
}

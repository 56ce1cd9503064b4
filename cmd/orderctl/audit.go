package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/idempotent-consumer/sbcosmos/cosmosstore"
	"github.com/idempotent-consumer/sbcosmos/internal/cli"
	"github.com/idempotent-consumer/sbcosmos/order"
	"github.com/idempotent-consumer/sbcosmos/order/audit"
	"github.com/idempotent-consumer/sbcosmos/payments"
	"golang.org/x/term"
)

// auditConfig is the configuration of "orderctl audit": the Cosmos DB and
// Service Bus settings the other programs read, and the audit's own.
type auditConfig struct {
	CosmosEndpoint           string
	CosmosKey                string // secret; emulators only
	CosmosDatabase           string
	CosmosContainer          string
	CosmosInsecureSkipVerify bool
	LeasesContainer          string // "": the leases live in the orders container

	Relays      string // comma-separated relay names
	MaxRelayLag time.Duration
	Consumers   string // comma-separated name[=container][@RFC 3339 time]
	InboxTTL    time.Duration

	LockDuration        time.Duration
	MessageTTL          time.Duration
	DuplicateWindow     time.Duration
	ResubmissionHorizon time.Duration
	ClaimHorizon        time.Duration // 0: the redelivery horizon computed from the four above

	PaymentsURL string
	Payments    bool

	Settle       time.Duration
	PageSize     int
	MaxPages     int
	MaxIDs       int
	Continuation string
	Format       string
	Timeout      time.Duration
	Progress     time.Duration // a progress line every Progress when stderr is not a terminal; 0: no progress

	consumers []consumerSetting // parsed Consumers
}

// consumerSetting is one entry of AUDIT_CONSUMERS.
type consumerSetting struct {
	name, container string
	since           time.Time
}

// auditError is an audit that could not complete: exit status 2, like a
// mistake on the command line, where violations exit 1.
type auditError struct{ err error }

func (e *auditError) Error() string { return e.err.Error() }
func (e *auditError) Unwrap() error { return e.err }
func (e *auditError) ExitCode() int { return 2 }

// violationsError is a completed audit that found violations: exit 1.
type violationsError struct{ n int }

func (e *violationsError) Error() string {
	return fmt.Sprintf("audit: %d violations (the report above lists them by invariant)", e.n)
}

// defaultRelays is RELAY_NAME's default: the deployed relay's name.
const defaultRelays = "orderrelay"

// parseAuditConfig reads the environment through lookupEnv (as
// os.LookupEnv), then args. RELAY_NAME set to "" (or blanks) turns the relay
// checks off, as -relays= does; not set, it is defaultRelays.
func parseAuditConfig(fs *flag.FlagSet, args []string, lookupEnv func(string) (string, bool)) (auditConfig, error) {
	var c auditConfig
	env := cli.NewEnv(fs, func(k string) string { v, _ := lookupEnv(k); return v })
	relays := defaultRelays
	if v, set := lookupEnv("RELAY_NAME"); set && strings.TrimSpace(v) == "" {
		relays = ""
	}
	env.String(&c.CosmosEndpoint, "cosmos-endpoint", "COSMOS_ENDPOINT", "", "Cosmos DB account endpoint (required)")
	env.Secret(&c.CosmosKey, "cosmos-key", "COSMOS_KEY", "", "Cosmos DB account key, for emulators only (Azure uses Entra ID)")
	env.String(&c.CosmosDatabase, "cosmos-database", "COSMOS_DATABASE", "orders", "Cosmos DB database")
	env.String(&c.CosmosContainer, "cosmos-container", "COSMOS_CONTAINER", "orders", "the orders container")
	env.Bool(&c.CosmosInsecureSkipVerify, "cosmos-insecure-skip-verify", "COSMOS_INSECURE_SKIP_VERIFY", false, "accept the emulator's self-signed certificate; never for Azure")
	env.String(&c.LeasesContainer, "leases-container", "COSMOS_LEASES_CONTAINER", "", "container of the relay's lease documents; empty: the orders container (emulators)")
	env.String(&c.Relays, "relays", "RELAY_NAME", relays, "comma-separated names of the relays whose leases are checked; empty (-relays= or RELAY_NAME set to \"\"): relay-lag and relay-lease are not checked")
	env.Duration(&c.MaxRelayLag, "max-relay-lag", "AUDIT_MAX_RELAY_LAG", audit.DefaultMaxRelayLag, "how old the oldest unpublished event after a relay's checkpoint may be")
	env.String(&c.Consumers, "consumers", "AUDIT_CONSUMERS", "", "comma-separated inbox consumers, each NAME[=CONTAINER][@SINCE]: its name (WORKER_INBOX_CONSUMER), the container of its markers (default: the orders container) and when its subscription was created (RFC 3339; default: always); empty: inbox and marker-ttl are not checked")
	env.Duration(&c.InboxTTL, "inbox-ttl", "WORKER_INBOX_TTL", defaultInboxTTL, "time-to-live of the consumers' inbox markers: an event older than it may have lost its markers; unlimited for none")
	env.Duration(&c.LockDuration, "lock-duration", "SERVICEBUS_LOCK_DURATION", defaultLockDuration, "the queue's lock duration (for the redelivery horizon)")
	env.Duration(&c.MessageTTL, "message-ttl", "SERVICEBUS_MESSAGE_TTL", defaultMessageTTL, "the queue's default message time-to-live, 0 or unlimited for none (for the redelivery horizon)")
	env.Duration(&c.DuplicateWindow, "duplicate-detection-window", "SERVICEBUS_DUPLICATE_DETECTION_WINDOW", defaultDuplicateWindow, "the queue's duplicate-detection window (for the redelivery horizon)")
	env.Duration(&c.ResubmissionHorizon, "resubmission-horizon", "WORKER_RESUBMISSION_HORIZON", defaultHorizon, "how long after dead-lettering a message may be resubmitted (for the redelivery horizon)")
	env.Duration(&c.ClaimHorizon, "claim-horizon", "AUDIT_CLAIM_HORIZON", 0, "how long a payment claim may stay in progress, and an order with a total stay unpaid; 0: the redelivery horizon W + 2T + 2D + H of the four settings above")
	env.SecretURL(&c.PaymentsURL, "payments-url", "PAYMENTS_URL", "", "base URL of the payments service: the workers capture payments, and its ledger (lookup by order reference) is checked")
	env.Bool(&c.Payments, "payments", "AUDIT_PAYMENTS", false, "the workers capture payments, without checking the ledger (implied by -payments-url)")
	env.Duration(&c.Settle, "settle", "AUDIT_SETTLE", audit.DefaultSettle, "how old an event must be before every consumer's marker is required")
	env.Int(&c.PageSize, "page-size", "AUDIT_PAGE_SIZE", audit.DefaultPageSize, "documents per change feed page: the audit holds one page and one order's partition at a time")
	env.Int(&c.MaxPages, "max-pages", "AUDIT_MAX_PAGES", 0, "stop after this many pages and print the continuation; 0: no limit")
	env.Int(&c.MaxIDs, "max-ids", "AUDIT_MAX_IDS", audit.DefaultMaxIDs, "violations listed per invariant")
	env.String(&c.Continuation, "continuation", "AUDIT_CONTINUATION", "", "resume an audit from the continuation an earlier one printed")
	env.String(&c.Format, "format", "AUDIT_FORMAT", "text", "output format: text or json")
	env.Duration(&c.Timeout, "timeout", "AUDIT_TIMEOUT", time.Hour, "bound of the whole audit; when it passes the audit prints its report so far and the continuation")
	env.Duration(&c.Progress, "progress", "AUDIT_PROGRESS", defaultAuditProgress, "progress on stderr: on a terminal one line, redrawn as the audit goes; otherwise (a job's log) a line every this long; 0: none")
	fs.Usage = func() { auditUsage(fs) }
	err := env.Parse(args)
	var usageErr *cli.UsageError
	if errors.Is(err, flag.ErrHelp) || errors.As(err, &usageErr) {
		return c, err
	}
	if c.MessageTTL == cli.Unlimited {
		c.MessageTTL = 0
	}
	if c.InboxTTL == cli.Unlimited {
		c.InboxTTL = order.UnboundedRetention
	}
	return c, errors.Join(err, c.Validate())
}

// Validate reports every missing or inconsistent setting at once.
func (c *auditConfig) Validate() error {
	var errs []error
	if c.CosmosEndpoint == "" {
		errs = append(errs, errors.New("COSMOS_ENDPOINT (-cosmos-endpoint) is required: the account to audit"))
	} else if err := cli.CheckEndpoint(c.CosmosEndpoint); err != nil {
		errs = append(errs, fmt.Errorf("COSMOS_ENDPOINT (-cosmos-endpoint): %w", err))
	}
	if c.CosmosInsecureSkipVerify && c.CosmosKey == "" {
		errs = append(errs, errors.New("COSMOS_INSECURE_SKIP_VERIFY is for emulators only, which need COSMOS_KEY"))
	}
	if c.CosmosDatabase == "" || c.CosmosContainer == "" {
		errs = append(errs, errors.New("COSMOS_DATABASE (-cosmos-database) and COSMOS_CONTAINER (-cosmos-container) must not be empty"))
	}
	for _, r := range c.relays() {
		if r == "" || strings.ContainsAny(r, "/\\?#") {
			errs = append(errs, fmt.Errorf("RELAY_NAME (-relays): %q is not a relay name", r))
		}
	}
	c.consumers = nil
	seen := map[string]bool{}
	for _, s := range splitList(c.Consumers) {
		cs, err := parseConsumer(s)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("AUDIT_CONSUMERS (-consumers): %w", err))
		case seen[cs.name]:
			errs = append(errs, fmt.Errorf("AUDIT_CONSUMERS (-consumers): consumer %q is named twice", cs.name))
		default:
			seen[cs.name] = true
			c.consumers = append(c.consumers, cs)
		}
	}
	if c.InboxTTL <= 0 {
		errs = append(errs, fmt.Errorf("WORKER_INBOX_TTL (-inbox-ttl) %v must be positive (or unlimited)", c.InboxTTL))
	}
	if c.LockDuration < time.Second || c.LockDuration > 5*time.Minute {
		errs = append(errs, fmt.Errorf("SERVICEBUS_LOCK_DURATION (-lock-duration) %v is outside Service Bus's 1s to 5m", c.LockDuration))
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"SERVICEBUS_DUPLICATE_DETECTION_WINDOW (-duplicate-detection-window)", c.DuplicateWindow},
		{"WORKER_RESUBMISSION_HORIZON (-resubmission-horizon)", c.ResubmissionHorizon},
		{"AUDIT_CLAIM_HORIZON (-claim-horizon)", c.ClaimHorizon}, {"AUDIT_SETTLE (-settle)", c.Settle}} {
		if d.v < 0 {
			errs = append(errs, fmt.Errorf("%s %v must not be negative", d.name, d.v))
		}
	}
	if c.MaxRelayLag <= 0 {
		errs = append(errs, fmt.Errorf("AUDIT_MAX_RELAY_LAG (-max-relay-lag) %v must be positive", c.MaxRelayLag))
	}
	if c.PaymentsURL != "" {
		if err := cli.CheckEndpoint(c.PaymentsURL); err != nil {
			errs = append(errs, fmt.Errorf("PAYMENTS_URL (-payments-url): %w", err))
		}
	}
	if c.PageSize < 1 || c.PageSize > 10_000 {
		errs = append(errs, fmt.Errorf("AUDIT_PAGE_SIZE (-page-size) %d is not between 1 and 10000", c.PageSize))
	}
	if c.MaxPages < 0 {
		errs = append(errs, fmt.Errorf("AUDIT_MAX_PAGES (-max-pages) %d must not be negative", c.MaxPages))
	}
	if c.MaxIDs < 1 {
		errs = append(errs, fmt.Errorf("AUDIT_MAX_IDS (-max-ids) %d must be positive", c.MaxIDs))
	}
	if c.Format != "text" && c.Format != "json" {
		errs = append(errs, fmt.Errorf("AUDIT_FORMAT (-format) %q is neither text nor json", c.Format))
	}
	if c.Timeout <= 0 {
		errs = append(errs, fmt.Errorf("AUDIT_TIMEOUT (-timeout) %v must be positive", c.Timeout))
	}
	if c.Progress < 0 {
		errs = append(errs, fmt.Errorf("AUDIT_PROGRESS (-progress) %v must not be negative", c.Progress))
	}
	return errors.Join(errs...)
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func (c *auditConfig) relays() []string { return splitList(c.Relays) }

// parseConsumer parses NAME[=CONTAINER][@SINCE].
func parseConsumer(s string) (consumerSetting, error) {
	var cs consumerSetting
	rest, since, hasSince := strings.Cut(s, "@")
	cs.name, cs.container, _ = strings.Cut(rest, "=")
	if err := order.ValidateConsumerName(cs.name); err != nil {
		return cs, fmt.Errorf("%q: %w", s, err)
	}
	if hasSince {
		t, err := time.Parse(time.RFC3339, since)
		if err != nil {
			return cs, fmt.Errorf("%q: the subscription's creation time %q is not an RFC 3339 time", s, since)
		}
		cs.since = t
	}
	return cs, nil
}

// horizon returns the redelivery horizon of the queue settings.
func (c *auditConfig) horizon() order.RedeliveryHorizon {
	return order.RedeliveryHorizon{LockDuration: c.LockDuration, MessageTimeToLive: c.MessageTTL,
		DuplicateDetectionWindow: c.DuplicateWindow, ResubmissionHorizon: c.ResubmissionHorizon}
}

// runAudit is "orderctl audit": args are the flags after "audit".
func runAudit(ctx context.Context, args []string, lookupEnv func(string) (string, bool), stdout, stderr io.Writer, now func() time.Time) error {
	fs := flag.NewFlagSet("orderctl audit", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfg, err := parseAuditConfig(fs, args, lookupEnv)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		var ue *cli.UsageError
		if errors.As(err, &ue) {
			return err
		}
		return &cli.UsageError{Err: err}
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	acfg, err := cfg.build()
	if err != nil {
		return &auditError{err}
	}
	acfg.Now = now
	progress := newAuditProgress(stderr, cfg.Progress)
	if cfg.Progress > 0 {
		acfg.Progress = progress.update
	}
	rep, err := audit.Run(ctx, acfg, cfg.Continuation)
	progress.done()
	if rep != nil {
		if werr := writeReport(stdout, cfg.Format, rep); werr != nil && err == nil {
			err = werr
		}
	}
	switch {
	case err != nil && rep != nil && rep.Continuation != "":
		return &auditError{fmt.Errorf("audit incomplete: %w; resume with -continuation %s", err, rep.Continuation)}
	case err != nil:
		return &auditError{err}
	case rep.Violations() > 0:
		return &violationsError{n: rep.Violations()}
	}
	return nil
}

// build opens the stores cfg names, every request at low priority.
func (c *auditConfig) build() (audit.Config, error) {
	sc := config{CosmosEndpoint: c.CosmosEndpoint, CosmosKey: c.CosmosKey, CosmosDatabase: c.CosmosDatabase,
		CosmosContainer: c.CosmosContainer, CosmosInsecureSkipVerify: c.CosmosInsecureSkipVerify}
	orders, err := openStore(sc)
	if err != nil {
		return audit.Config{}, err
	}
	open := func(container string) (*cosmosstore.Store, error) {
		if container == "" || container == c.CosmosContainer {
			return orders, nil
		}
		o := sc
		o.CosmosContainer = container
		return openStore(o)
	}
	claim := c.ClaimHorizon
	minRetention, _ := c.horizon().MinRetention()
	if claim == 0 {
		claim = minRetention
	}
	if claim == order.UnboundedRetention {
		claim = 0 // no claim is too old when copies can wait for ever
		minRetention = 0
	}
	a := audit.Config{Orders: orders, Feed: orders.ChangeFeed().LowPriority(), Relays: c.relays(), MaxRelayLag: c.MaxRelayLag,
		MinMarkerRetention: minRetention, ClaimHorizon: claim, Payments: c.Payments || c.PaymentsURL != "",
		Settle: c.Settle, PageSize: c.PageSize, MaxPages: c.MaxPages, MaxIDs: c.MaxIDs}
	leases, err := open(c.LeasesContainer)
	if err != nil {
		return audit.Config{}, err
	}
	a.Leases = leases
	for _, cs := range c.consumers {
		s, err := open(cs.container)
		if err != nil {
			return audit.Config{}, err
		}
		a.Consumers = append(a.Consumers, audit.Consumer{Name: cs.name, Store: s, Since: cs.since, MarkerTTL: c.InboxTTL})
	}
	if c.PaymentsURL != "" {
		pc, err := payments.NewClient(c.PaymentsURL, nil)
		if err != nil {
			return audit.Config{}, fmt.Errorf("PAYMENTS_URL (-payments-url) %q: %w", cli.MaskURL(c.PaymentsURL), err)
		}
		a.Ledger = payments.Gateway{Client: pc}
	}
	return a, nil
}

// writeReport prints rep in format: text, one line per invariant and one
// per listed violation, or the Report as JSON.
func writeReport(w io.Writer, format string, rep *audit.Report) error {
	if format == "json" {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "audit of %d documents (%d orders) in %d pages, %.1fs: %.1f orders/s\n", rep.Documents, rep.Orders, rep.Pages, rep.Seconds, rep.OrdersPerSecond)
	for _, r := range rep.Invariants {
		switch {
		case r.NotChecked != "":
			fmt.Fprintf(&b, "%-15s not checked: %s\n", r.Name, r.NotChecked)
			continue
		case r.Violations == 0:
			fmt.Fprintf(&b, "%-15s ok        %d checked\n", r.Name, r.Checked)
			continue
		}
		fmt.Fprintf(&b, "%-15s VIOLATED  %d of %d checked\n", r.Name, r.Violations, r.Checked)
		for _, v := range r.First {
			fmt.Fprintf(&b, "  %s: %s\n", v.ID, v.Detail)
		}
		if more := r.Violations - len(r.First); more > 0 {
			fmt.Fprintf(&b, "  ... and %d more\n", more)
		}
	}
	if rep.Continuation != "" {
		fmt.Fprintf(&b, "incomplete: resume with -continuation %s\n", rep.Continuation)
	} else {
		fmt.Fprintf(&b, "%d violations\n", rep.Violations())
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// defaultAuditProgress is how often a progress line is printed when
// stderr is not a terminal: a line a minute keeps a job's log short (two
// hours of audit: 120 lines) and says it is alive.
const defaultAuditProgress = time.Minute

// progressRedraw is how often, at most, the progress line on a terminal is
// redrawn.
const progressRedraw = 200 * time.Millisecond

// auditProgress prints an audit's progress on stderr: on a terminal one
// line, redrawn at most every progressRedraw and cleared at the end;
// otherwise a line every interval, the first after one interval (a short
// audit prints none). It measures time by the audit's Elapsed, and reads
// no clock of its own. audit.Run calls update from one goroutine.
type auditProgress struct {
	w        io.Writer
	terminal bool
	every    time.Duration
	next     time.Duration // the Elapsed from which the next line is due
	dirty    bool          // a line on the terminal is to be cleared
}

func newAuditProgress(w io.Writer, every time.Duration) *auditProgress {
	f, ok := w.(*os.File)
	p := &auditProgress{w: w, terminal: ok && term.IsTerminal(int(f.Fd())), every: every}
	if !p.terminal {
		p.next = every
	}
	return p
}

// update is the audit's Config.Progress.
func (p *auditProgress) update(pr audit.Progress) {
	if pr.Elapsed < p.next {
		return
	}
	line := fmt.Sprintf("audit: feed range %d of %d, %d pages, %d documents, %d orders, %.1f orders/s, %v",
		pr.Range, pr.Ranges, pr.Pages, pr.Documents, pr.Orders, pr.OrdersPerSecond(), pr.Elapsed.Round(time.Second))
	if p.terminal {
		fmt.Fprintf(p.w, "\r\033[K%s", line)
		p.dirty, p.next = true, pr.Elapsed+progressRedraw
		return
	}
	fmt.Fprintln(p.w, line)
	p.next = pr.Elapsed + p.every
}

// done clears the terminal's progress line, so that the report and the
// errors that follow start on a clean line.
func (p *auditProgress) done() {
	if p.dirty {
		fmt.Fprint(p.w, "\r\033[K")
		p.dirty = false
	}
}

func auditUsage(fs *flag.FlagSet) {
	fmt.Fprint(fs.Output(), `Usage: orderctl audit [flags]

Checks on the deployment's stored state what the simulation checks on its
model, reading every document of the orders container's change feed (from
the beginning of every feed range, COSMOS_ENDPOINT, COSMOS_DATABASE,
COSMOS_CONTAINER) at low priority (x-ms-cosmos-priority-level: Low on every
request), one page and one order's partition at a time:

  order-event     every order has exactly one OrderAccepted event with its request hash,
                  and its request hash is the hash of its stored fields
  event-order     every event has its order
  payment         every payment record is completed for the order's amount, with one payment id;
                  with PAYMENTS_URL or -payments, an order with a total older than the claim
                  horizon has one
  payment-ledger  the payments service's ledger (lookup by order reference, PAYMENTS_URL) holds
                  exactly that one charge; not checked without PAYMENTS_URL
  payment-claim   no payment claim in progress longer than the claim horizon (the redelivery
                  horizon W + 2T + 2D + H from the SERVICEBUS_* settings, or AUDIT_CLAIM_HORIZON)
  status          status and version agree with the recorded status hashes
  inbox           every event that occurred after the consumer's subscription existed, older than
                  AUDIT_SETTLE and younger than WORKER_INBOX_TTL, has that consumer's marker with its
                  request hash, and the consumer has as many entries as markers (AUDIT_CONSUMERS)
  marker-ttl      every marker has a ttl of at least the redelivery horizon (or -1) and is gone
                  after it (AUDIT_CONSUMERS)
  relay-lag       no event after a relay's checkpoint older than AUDIT_MAX_RELAY_LAG, and a lease
                  for every feed range of its manifest (RELAY_NAME, COSMOS_LEASES_CONTAINER)
  relay-lease     no feed range held by two relays at once

It cannot see the broker: an order younger than the claim horizon may still
be being paid; two instances of one relay are fenced by ETags, which leave no
trace in the lease document; the subscriptions' creation times are settings
(AUDIT_CONSUMERS NAME[=CONTAINER][@SINCE]), not read from Service Bus; a
document changed during the audit may be checked twice.

Output: a summary by invariant with the first AUDIT_MAX_IDS violations (ids and
why), as text or with -format json the report object, with the documents and
orders checked, the time taken and the rate (orders/s); "incomplete: resume
with -continuation C" when -max-pages or -timeout stopped it. Progress goes to
stderr: on a terminal one line redrawn as the audit goes, otherwise a line
every AUDIT_PROGRESS (1m; 0: none).
Exit status: 0 clean; 1 violations; 2 a mistake in the settings, or an audit
that could not complete (a failed read, the timeout: resume it).

In Azure:     COSMOS_ENDPOINT (Entra ID, the Cosmos DB Data Reader role; AZURE_CLIENT_ID selects a managed identity)
On emulators: COSMOS_ENDPOINT, COSMOS_KEY
Durations: Go (90s, 1h30m), days (35d, 1d12h) or ISO 8601 (PT1M, P14D).

Flags:
`)
	fs.PrintDefaults()
}

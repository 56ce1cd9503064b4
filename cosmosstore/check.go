package cosmosstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"
	"github.com/idempotent-consumer/sbcosmos/idempotent"
)

// The settings that Check's errors name, so that an operator knows what to
// change. They are the environment variables of this project's commands
// (each also has a flag); a program of its own can use the same names.
const (
	SettingEndpoint  = "COSMOS_ENDPOINT"
	SettingKey       = "COSMOS_KEY"
	SettingDatabase  = "COSMOS_DATABASE"
	SettingContainer = "COSMOS_CONTAINER"
	SettingClientID  = "AZURE_CLIENT_ID"
)

// DataContributorRole is the Cosmos DB data-plane role a consumer's identity
// needs: it may read and write items and read the account's metadata.
const DataContributorRole = "Cosmos DB Built-in Data Contributor"

// probeTTL is the time to live of Check's probe document, in seconds, in
// case Check cannot delete it.
const probeTTL = 300

// wrongETag is an If-Match value that no document has: Cosmos DB's ETags are
// quoted GUIDs that it never makes all zeros.
const wrongETag = `"00000000-0000-0000-0000-000000000000"`

// CheckResult is what Check found out about the store.
type CheckResult struct {
	Endpoint, Database, Container string
	// ETagsHonoured reports whether a replace with an If-Match ETag that
	// does not match fails with 412, as in Cosmos DB. False means an
	// emulator that ignores If-Match, such as cosmium v0.1.20: every
	// ETag-conditioned write there (a claim taken over, a state replaced)
	// is unconditional, so concurrent deliveries can overwrite each other.
	// A consumer must refuse to start, or warn loudly, when it is false.
	ETagsHonoured bool
	// PatchConditionsHonoured reports whether a patch whose filter
	// predicate is false fails with 412, as in Cosmos DB. False means an
	// emulator that applies a patch whatever its condition, such as
	// cosmium v0.1.20: a caller there must apply conditional changes by
	// read and replace (WithoutPatch), or a stale change overwrites a newer
	// one even without any concurrency.
	PatchConditionsHonoured bool
	// ProbeID is the id, and partition key value, of the document Check
	// created in a partition of its own.
	ProbeID string
	// ProbeDeleted reports whether Check deleted the probe document again.
	// If not, Cosmos DB deletes it after probeTTL seconds (the container's
	// default TTL is -1; an emulator that ignores TTL keeps it).
	ProbeDeleted bool
	// DefaultTTL is the container's default time to live (defaultTtl) as
	// the container's properties report it, or nil when they report none.
	// Check requires -1. Nil is accepted only from a server that also
	// ignores If-Match (ETagsHonoured false), an emulator such as cosmium
	// v0.1.20, which neither reports nor applies any TTL; from Cosmos DB,
	// nil means TTL off and Check fails.
	DefaultTTL *int32
	// WriteRegions are the account's write regions, as the account's
	// properties list them (writableLocations), and AccountRead reports
	// whether Check saw those properties: it sees them through a client
	// built by NewClient, NewClientWithKey or NewClientFromConnectionString
	// (azcosmos reads them but does not export them), and not through a
	// client built with azcosmos directly. Check refuses an account with
	// multiple write locations (see SettingMultipleWriteLocations).
	WriteRegions []string
	AccountRead  bool
}

// RequiredDefaultTTL is the container default time to live that Check
// requires: TTL on, with no default expiry. A positive default would make
// Cosmos DB delete every document without a "ttl" of its own (idempotency
// markers, outbox events, effect records, leases) that many seconds after
// its last write, so that a late copy of a message would be processed
// again; TTL off (no defaultTtl) would make Cosmos DB ignore the "ttl" of
// the documents that have one (inbox markers), so that they never expire.
const RequiredDefaultTTL = -1

// Check verifies, before the first message, that the store can work: that
// the account answers, that the database and the container exist, that the
// container is partitioned on the Store's partition key path (the one New
// was given) with the default time to live -1 (RequiredDefaultTTL), that the
// identity may read and write items, and whether the server honours If-Match
// ETags and patch conditions, and that the account has a single write
// region (see SettingMultipleWriteLocations). It reads a missing item, reads the container's properties,
// creates a probe document in a partition of its own (a random id with a
// "ttl"), replaces it with a wrong If-Match ETag, patches it with a false
// condition and deletes it. Each failure names the setting to fix (see
// SettingEndpoint and the other Setting constants) and wraps the *Error of
// the failed call, so that idempotent.IsTransient tells an outage from a
// misconfiguration; a default TTL other than -1 is refused with the command
// that fixes it (see RequiredDefaultTTL and CheckResult.DefaultTTL). A
// server that ignores If-Match or patch conditions is not an error: it is reported in CheckResult.ETagsHonoured and
// CheckResult.PatchConditionsHonoured.
//
// ctx bounds every call; give it a deadline (tens of seconds: the SDK retries
// a refused connection before it gives up). Check is safe to call
// concurrently with the other methods and leaves no document behind once the
// probe's TTL has passed.
func (s *Store) Check(ctx context.Context) (res CheckResult, err error) {
	res = CheckResult{Endpoint: s.endpoint, Database: s.database, Container: s.container.ID()}
	probe, err := probeID()
	if err != nil {
		return res, err
	}
	res.ProbeID = probe

	// 1. A point read of a missing item: 404 with sub-status 0 means the
	// container exists and the identity may read it.
	if _, err := s.readItem(ctx, probe, probe); err != nil {
		if err = classifyDocument(opCheck, probe, probe, err); !isMissingItem(err) {
			return res, s.checkFailure(ctx, "read an item", err)
		}
	}

	// The account: that read went through the client's pipeline, which
	// read the account's properties first (azcosmos does so before the
	// first request and every few minutes after).
	if err := s.checkAccount(&res); err != nil {
		return res, err
	}

	// 2. The container's partition key path.
	cresp, err := bounded(ctx, func(ctx context.Context) (azcosmos.ContainerResponse, error) { return s.container.Read(ctx, nil) })
	if err != nil {
		e := classify(opReadContainer, res.Container, err)
		if isStatus(err, http.StatusNotFound) {
			// A server that does not send sub-status 1003, such as
			// cosmium, shows a missing container here.
			return res, fmt.Errorf("cosmosstore: check: read the container's properties: %s: %w", s.whatIsMissing(ctx), e)
		}
		return res, s.checkFailure(ctx, "read the container's properties", e)
	}
	if cresp.ContainerProperties == nil {
		return res, fmt.Errorf("cosmosstore: check: read container %q in database %q: no properties in the response", res.Container, res.Database)
	}
	if paths := cresp.ContainerProperties.PartitionKeyDefinition.Paths; !slices.Equal(paths, []string{s.pkPath}) {
		return res, fmt.Errorf("cosmosstore: check: container %q in database %q is partitioned on %q, not [%q] as the Store was built for, so Cosmos DB would refuse every write with 400: set %s to a container partitioned on %s, or build the Store with the container's path",
			res.Container, res.Database, paths, s.pkPath, SettingContainer, s.pkPath)
	}
	res.DefaultTTL = cresp.ContainerProperties.DefaultTimeToLive
	if ttl := res.DefaultTTL; ttl != nil && *ttl != RequiredDefaultTTL {
		return res, s.ttlError(*ttl)
	}
	// A missing defaultTtl is refused below, once the probe has shown
	// whether the server is an emulator that ignores TTL altogether.
	defer func() {
		if err == nil && res.DefaultTTL == nil && res.ETagsHonoured {
			err = s.ttlOffError()
		}
	}()

	// 3. Write: create the probe document.
	body, err := json.Marshal(map[string]any{"id": probe, s.pkPath[1:]: probe, "type": "startupCheck", "ttl": probeTTL})
	if err != nil {
		return res, err
	}
	created, err := s.createItem(ctx, probe, body)
	if err != nil {
		return res, s.checkFailure(ctx, "create a document", classifyDocument(opCheck, probe, probe, err))
	}
	defer func() {
		_, derr := s.deleteItem(ctx, probe, probe)
		res.ProbeDeleted = derr == nil
	}()

	// 4. A replace with an ETag the document does not have must fail with
	// 412; a server that replaces anyway ignores If-Match.
	etag := azcore.ETag(wrongETag)
	if created.ETag == etag {
		etag = azcore.ETag(`"ffffffff-ffff-ffff-ffff-ffffffffffff"`)
	}
	_, err = s.replaceItem(ctx, probe, probe, body, &azcosmos.ItemOptions{IfMatchEtag: &etag})
	if err != nil {
		if err = classifyDocument(opCheck, probe, probe, err); !errors.Is(err, idempotent.ErrPreconditionFailed) {
			return res, s.checkFailure(ctx, "replace a document with an If-Match ETag", err)
		}
		res.ETagsHonoured = true
	}

	// 5. A patch whose filter predicate is false must fail with 412; a
	// server that applies it anyway ignores patch conditions.
	var ops azcosmos.PatchOperations
	ops.SetCondition("FROM c WHERE c.type = 'notAStartupCheck'")
	ops.AppendSet("/patched", true)
	if _, err = s.patchItem(ctx, probe, probe, ops); err != nil {
		if err = classifyDocument(opCheck, probe, probe, err); !errors.Is(err, idempotent.ErrPreconditionFailed) {
			return res, s.checkFailure(ctx, "patch a document with a condition", err)
		}
		res.PatchConditionsHonoured = true
	}
	return res, nil
}

// checkAccount fills in what res says about the account and refuses one
// with multiple write locations.
func (s *Store) checkAccount(res *CheckResult) error {
	w := watchOf(s.client)
	if w == nil {
		return nil
	}
	props, ok := w.properties()
	if !ok {
		return nil
	}
	res.AccountRead = true
	for _, l := range props.WritableLocations {
		res.WriteRegions = append(res.WriteRegions, l.Name)
	}
	if props.MultipleWriteLocations {
		return fmt.Errorf("cosmosstore: check: the account at %s=%s has multiple write locations (%s: true; write regions %q): "+
			"there Cosmos DB accepts a create of the same id in two regions, both commit and last-writer-wins merges them without a conflict, "+
			"so two deliveries of one message handled in two regions would both be taken for the first and both act. "+
			"Use an account with a single write region (az cosmosdb update --name ACCOUNT --resource-group GROUP --enable-multiple-write-locations false; "+
			"read regions stay), as docs/exactly-once.md explains",
			SettingEndpoint, s.endpoint, SettingMultipleWriteLocations, res.WriteRegions)
	}
	return nil
}

// ttlError explains a container whose default TTL is ttl, not -1.
func (s *Store) ttlError(ttl int32) error {
	what := fmt.Sprintf("Cosmos DB deletes every document without a ttl of its own (idempotency markers, outbox events, effect records, leases) %d seconds after its last write, and a late copy of a message would then be processed again", ttl)
	if ttl <= 0 {
		what = "Cosmos DB accepts only -1 or a positive number there"
	}
	return fmt.Errorf("cosmosstore: check: container %q in database %q has the default time to live (defaultTtl) %d: %s. %s",
		s.container.ID(), s.database, ttl, what, s.ttlFix())
}

// ttlOffError explains a container with time to live off.
func (s *Store) ttlOffError() error {
	return fmt.Errorf("cosmosstore: check: container %q in database %q has time to live off (no defaultTtl): Cosmos DB ignores the documents' own ttl, so documents with a ttl of their own, such as inbox markers, never expire. %s",
		s.container.ID(), s.database, s.ttlFix())
}

// ttlFix names the fix for a container whose default TTL is not -1.
func (s *Store) ttlFix() string {
	return fmt.Sprintf("Set it to %d (TTL on, nothing expires unless a document says so): az cosmosdb sql container update --account-name ACCOUNT --resource-group GROUP --database-name %s --name %s --ttl %d, or deploy the container with defaultTtl: %d as the Bicep template (infra/bicep/modules/cosmos.bicep) does",
		RequiredDefaultTTL, s.database, s.container.ID(), RequiredDefaultTTL, RequiredDefaultTTL)
}

// Ping is the cheap probe of a reader, such as a relay's health check whose
// role may only read the container: one point read of an item that does not
// exist, which costs about one request unit. It returns nil when the
// container answers (a 404 with sub-status 0, or the item), and otherwise
// the *Error of the read: transient for an outage, permanent for a missing
// container (404 with sub-status 1003), 401 or 403. A container that
// answers reads and refuses writes passes it: the circuit breaker of a
// worker that writes probes with Probe. ctx bounds the call. It is safe for
// concurrent use.
func (s *Store) Ping(ctx context.Context) error {
	_, err := s.readItem(ctx, pingID, pingID)
	if err == nil {
		return nil
	}
	if err = classifyDocument(opPing, pingID, pingID, err); isMissingItem(err) {
		return nil
	}
	return err
}

// pingID is the id and the partition key value of the item Ping reads and
// Probe deletes. Nothing creates it.
const pingID = "cosmosstore-ping"

// Probe is the probe of a circuit breaker in front of a worker that writes:
// Ping's point read, then a delete of the same missing item (id and
// partition key value "cosmosstore-ping"). A container that answers reads
// but refuses writes passes Ping and fails Probe: a write-region outage
// answers the delete with 503 or a timeout, an identity whose role was cut
// to Cosmos DB Built-in Data Reader with 403. The delete writes nothing, so
// nothing reaches the change feed: a relay, an audit or an inbox has no
// probe document to skip.
//
// Probe returns nil when both calls answer as a healthy container does: the
// read a 404 with sub-status 0 or the item, the delete a 404 with sub-status
// 0 or, if someone created the item, 204 (it is then deleted). Otherwise it
// returns the *Error of the first call that failed, classified as Ping's
// are: transient (idempotent.ErrTransient) for 503, 408, 429 and timeouts,
// permanent for 401, 403 and a missing container (404 with sub-status
// 1003). A failed read has Op "ping", a failed delete Op "probe delete".
// The delete is not sent when the read failed.
//
// It costs the read, about one request unit, and the delete of a missing
// item, taken to be about one request unit as a point read: not measured
// (cosmium reports no charges; against Cosmos DB, RequestCharge counts both
// calls' charges). Probe sees a failure that every write of the container
// meets; it cannot see one confined to other partition key values (one
// physical partition's key range down or throttled: it addresses one
// value, "cosmosstore-ping"), nor a storage quota, of a logical partition
// or of the container (a delete frees space and is allowed where a create
// is refused). ctx bounds both calls. It is safe for concurrent use.
func (s *Store) Probe(ctx context.Context) error {
	if err := s.Ping(ctx); err != nil {
		return err
	}
	_, err := s.deleteItem(ctx, pingID, pingID)
	if err == nil {
		return nil
	}
	if err = classifyDocument(opProbeDelete, pingID, pingID, err); isMissingItem(err) {
		return nil
	}
	return err
}

// isMissingItem reports whether err is the 404 of a missing item in a
// container that exists.
func isMissingItem(err error) bool { return errors.Is(err, idempotent.ErrNotFound) }

// checkFailure explains err, the failure of Check's step, naming the setting
// to fix. It wraps err.
func (s *Store) checkFailure(ctx context.Context, step string, err error) error {
	var e *Error
	if !errors.As(err, &e) {
		return fmt.Errorf("cosmosstore: check: %s: %w", step, err)
	}
	container := s.container.ID()
	var hint string
	switch {
	case e.StatusCode == http.StatusNotFound && e.SubStatus == subStatusOwnerNotFound:
		hint = s.whatIsMissing(ctx)
	case e.StatusCode == http.StatusUnauthorized:
		hint = fmt.Sprintf("the account at %s=%s refused the credential: with %s, the key is not this account's; with Microsoft Entra ID, the token is not for this account (check %s and the tenant)",
			SettingEndpoint, s.endpoint, SettingKey, SettingClientID)
	case e.StatusCode == http.StatusForbidden:
		hint = fmt.Sprintf("the identity may not %s in container %q of database %q: assign it the data-plane role %q on this container or its database (%s names the managed identity; a new role assignment takes a few minutes to apply), or the account's firewall refuses this address",
			step, container, s.database, DataContributorRole, SettingClientID)
	case e.StatusCode == 0 && idempotent.IsTransient(err):
		hint = fmt.Sprintf("cannot reach Cosmos DB at %s=%s: check the endpoint and the network", SettingEndpoint, s.endpoint)
	default:
		hint = fmt.Sprintf("unexpected answer from %s=%s, database %q (%s), container %q (%s)",
			SettingEndpoint, s.endpoint, s.database, SettingDatabase, container, SettingContainer)
	}
	return fmt.Errorf("cosmosstore: check: %s: %s: %w", step, hint, err)
}

// whatIsMissing tells a missing database from a missing container, after a
// 404 with sub-status 1003.
func (s *Store) whatIsMissing(ctx context.Context) string {
	container := s.container.ID()
	both := fmt.Sprintf("database %q (%s) or container %q (%s) does not exist: set them to the names the Bicep template created",
		s.database, SettingDatabase, container, SettingContainer)
	if s.client == nil {
		return both
	}
	db, err := s.client.NewDatabase(s.database)
	if err != nil {
		return both
	}
	_, err = bounded(ctx, func(ctx context.Context) (azcosmos.DatabaseResponse, error) { return db.Read(ctx, nil) })
	switch {
	case err == nil:
		return fmt.Sprintf("container %q does not exist in database %q: set %s to the container the Bicep template created",
			container, s.database, SettingContainer)
	case isStatus(err, http.StatusNotFound):
		return fmt.Sprintf("database %q does not exist at %s: set %s to the database the Bicep template created",
			s.database, s.endpoint, SettingDatabase)
	}
	return both
}

// probeID returns a fresh id for Check's probe document.
func probeID() (string, error) {
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("cosmosstore: check: probe id: %w", err)
	}
	return "cosmosstore-check-" + hex.EncodeToString(b), nil
}

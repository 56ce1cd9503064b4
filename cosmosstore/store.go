package cosmosstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	azruntime "github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"
	"github.com/idempotent-consumer/sbcosmos/idempotent"
)

// The store calls, as Error.Op names them.
const (
	opCreateDocuments = "create documents"
	opReadDocument    = "read document"
	opReplaceDocument = "replace document"
	opPatchDocument   = "patch document"
	opCheck           = "check"
	opReadContainer   = "read container"
	opPing            = "ping"
	opProbeDelete     = "probe delete"
)

// Cosmos DB response headers the store reads (x-ms-request-charge, ...),
// in their canonical form: http.Header.Get canonicalizes the key it is
// given, which allocates a new string for one that is not.
const (
	headerRequestCharge = "X-Ms-Request-Charge"
	headerActivityID    = "X-Ms-Activity-Id"
	headerSubStatus     = "X-Ms-Substatus"
)

// Store is an idempotent.Store, DocumentStore and Patcher on one Cosmos DB
// container. It is safe for concurrent use.
//
// A Store is one Cosmos DB session: it keeps the session token of the
// latest response for each of the SessionTokenPartitions partition keys it
// used most recently and sends it on the reads and batches of that
// partition, so that under the account's Session consistency a read sees
// every write of that partition this Store has made, been refused (409) or
// read before the read began. Other processes, and a partition whose token
// was evicted, read at the account's consistency alone.
type Store struct {
	client    *azcosmos.Client
	container *azcosmos.ContainerClient
	// untraced is the container on the client's untraced twin, used for
	// the calls whose context skipTracing reports (ClientOptions.Untraced);
	// nil: none.
	untraced    *azcosmos.ContainerClient
	skipTracing func(context.Context) bool
	database    string
	endpoint    string
	pkPath      string        // the container's partition key path, as Check expects it
	charge      atomic.Uint64 // math.Float64bits of the request units charged so far
	sessions    *sessionTokens
}

var (
	_ idempotent.Store         = (*Store)(nil)
	_ idempotent.DocumentStore = (*Store)(nil)
	_ idempotent.Patcher       = (*Store)(nil)
)

// New returns a Store on the container named container in the database
// named database, partitioned on partitionKeyPath: a top-level field such as
// "/tenantId", which every document the Store writes must carry with its
// partition key value (the pk argument of each call). ReadPartition queries
// that field, and Check verifies that the container is partitioned on it. A
// path that is empty, nested ("/a/b") or not a plain name is an error.
//
// New makes no request: a missing database or container, or one partitioned
// on another path, shows up as a permanent error of the first call, unless
// Check is called first.
func New(c *azcosmos.Client, database, container, partitionKeyPath string) (*Store, error) {
	if err := checkPartitionKeyPath(partitionKeyPath); err != nil {
		return nil, err
	}
	if c == nil {
		return nil, errors.New("cosmosstore: New needs a client")
	}
	cc, err := c.NewContainer(database, container)
	if err != nil {
		return nil, fmt.Errorf("cosmosstore: container %q in database %q: %w", container, database, err)
	}
	s := &Store{client: c, container: cc, database: database, endpoint: c.Endpoint(), pkPath: partitionKeyPath,
		sessions: newSessionTokens(SessionTokenPartitions)}
	if b := builtOf(c); b.untraced != nil {
		if s.untraced, err = b.untraced.NewContainer(database, container); err != nil {
			return nil, fmt.Errorf("cosmosstore: container %q in database %q: %w", container, database, err)
		}
		s.skipTracing = b.when
	}
	return s, nil
}

// containerFor returns the container client of a call under ctx: the
// untraced twin's when the client has one and ctx is to record no spans
// (ClientOptions.Untraced), else the client's own.
func (s *Store) containerFor(ctx context.Context) *azcosmos.ContainerClient {
	if s.untraced != nil && s.skipTracing(ctx) {
		return s.untraced
	}
	return s.container
}

// checkPartitionKeyPath refuses a partition key path that is not one
// top-level field with a plain name: the store writes the field's name into
// ReadPartition's query and Check's probe document.
func checkPartitionKeyPath(path string) error {
	if path == "" {
		return errors.New("cosmosstore: no partition key path: give the container's, a top-level field such as \"/tenantId\"")
	}
	if len(path) < 2 || path[0] != '/' || !isIdentifier(path[1:]) {
		return fmt.Errorf("cosmosstore: partition key path %q: want a top-level field with a plain name, such as \"/tenantId\"", path)
	}
	return nil
}

// PartitionKeyPath returns the partition key path the Store was built for,
// such as "/tenantId".
func (s *Store) PartitionKeyPath() string { return s.pkPath }

// CreateBatch implements idempotent.Store: it creates every document of
// docs in partition pk in one transactional batch, all of them or none, and
// returns the ETags the batch response reports for them
// (TransactionalBatchResult.ETag), so that no read is needed before a
// conditional replace. If any of them exists it writes nothing and returns
// an *Error that matches idempotent.ErrAlreadyExists, whose Index is the
// conflicting document's position in docs. Each document's JSON must carry
// pk in the field the Store's partition key path names (see New); a "ttl"
// field (seconds) makes Cosmos DB delete the document that long after the
// write (see Time to live in the package documentation). Cosmos DB limits a
// batch to 100 operations and 2 MB; an empty docs is an error, as it is for
// the SDK.
//
// Concurrent calls that create the same id are safe: the batch is written
// at most once, so at most one call returns nil and every other one returns
// an error. A call whose batch committed may still return a transient error
// (a timeout, a lost connection after the write), and its retry then
// returns idempotent.ErrAlreadyExists for its own write: callers decide by
// reading the document, never by which call returned nil.
func (s *Store) CreateBatch(ctx context.Context, pk string, docs []idempotent.Document) ([]string, error) {
	return s.createBatch(ctx, opCreateDocuments, pk, docs)
}

// createBatch creates docs in partition pk in one transactional batch and
// returns the ETag of each created document, in the order of docs. It is
// the one batch path of the store; op names the caller in errors.
func (s *Store) createBatch(ctx context.Context, op, pk string, docs []idempotent.Document) ([]string, error) {
	if len(docs) == 0 {
		return nil, &Error{Op: op, PartitionKey: pk, Index: -1, Err: errors.New("no documents to create")}
	}
	batch := s.container.NewTransactionalBatch(azcosmos.NewPartitionKeyString(pk))
	for _, d := range docs {
		batch.CreateItem(d.Body, nil)
	}
	resp, err := s.executeBatch(ctx, pk, batch)
	if err != nil {
		return nil, classify(op, pk, err)
	}
	r := batchResult{
		HTTPStatus:  resp.RawResponse.StatusCode,
		Success:     resp.Success,
		StatusCodes: make([]int, len(resp.OperationResults)),
		ActivityID:  resp.ActivityID,
	}
	failed := false
	for i, res := range resp.OperationResults {
		r.StatusCodes[i] = int(res.StatusCode)
		failed = failed || !is2xx(r.StatusCodes[i])
	}
	if failed {
		// Only a failed operation's error carries its sub-status: a batch
		// that committed is not decoded a second time.
		r.SubStatuses = batchSubStatuses(resp.RawResponse)
	}
	if err := interpretBatch(op, pk, len(docs), r); err != nil {
		return nil, err
	}
	etags := make([]string, len(resp.OperationResults))
	for i, res := range resp.OperationResults {
		etags[i] = string(res.ETag)
	}
	return etags, nil
}

// batchSubStatuses returns the "subStatusCode" of each operation of a
// transactional batch response, which azcosmos v1.5.0 does not parse: the
// body the SDK read is cached on the response. It returns nil when the body
// cannot be read again or decoded.
func batchSubStatuses(resp *http.Response) []int {
	if resp == nil {
		return nil
	}
	body, err := azruntime.Payload(resp)
	if err != nil {
		return nil
	}
	var ops []struct {
		SubStatusCode int `json:"subStatusCode"`
	}
	if json.Unmarshal(body, &ops) != nil {
		return nil
	}
	subs := make([]int, len(ops))
	for i, o := range ops {
		subs[i] = o.SubStatusCode
	}
	return subs
}

// ReadDocument returns the JSON body of document id in partition pk and its
// ETag, or an *Error that matches idempotent.ErrNotFound if there is none. The
// ETag is what ReplaceDocument takes as ifMatch. Cosmos DB always sends one;
// it is empty only from a server that sends none, such as cosmium.
func (s *Store) ReadDocument(ctx context.Context, pk, id string) ([]byte, string, error) {
	resp, err := s.readItem(ctx, pk, id)
	if err != nil {
		return nil, "", classifyDocument(opReadDocument, pk, id, err)
	}
	return resp.Value, string(resp.ETag), nil
}

// ReplaceDocument replaces document d.ID in partition pk with d.Body and
// returns the new ETag. With a non-empty ifMatch the replace is conditional
// (an If-Match header): if the document changed since the read that returned
// ifMatch, it writes nothing and returns an *Error that matches
// idempotent.ErrPreconditionFailed. An empty ifMatch replaces unconditionally. A
// missing document gives an *Error that matches idempotent.ErrNotFound.
//
// Concurrent conditional replaces of one document are safe: of those that
// pass the same ifMatch, exactly one succeeds and the others fail with
// idempotent.ErrPreconditionFailed. The call is not idempotent by itself; callers
// make it so by deciding again after a fresh read.
//
// A "ttl" field (seconds) in d.Body makes Cosmos DB delete the document that
// long after this write, not after the first: the container's default TTL of
// -1, which CreateDatabaseAndContainer and the Bicep template set, turns
// per-item TTL on. The store itself does nothing for it.
func (s *Store) ReplaceDocument(ctx context.Context, pk string, d idempotent.Document, ifMatch string) (string, error) {
	// EnableContentResponseOnWrite stays false (Prefer: return=minimal): the
	// ETag header is all the store needs of the response.
	o := &azcosmos.ItemOptions{}
	if ifMatch != "" {
		etag := azcore.ETag(ifMatch)
		o.IfMatchEtag = &etag
	}
	resp, err := s.replaceItem(ctx, pk, d.ID, d.Body, o)
	if err != nil {
		return "", classifyDocument(opReplaceDocument, pk, d.ID, err)
	}
	return string(resp.ETag), nil
}

// PatchDocument patches document id in partition pk with p in one request:
// Cosmos DB's patch (PatchOperations), with p.If as its filter predicate
// ("FROM c WHERE c.version < 5 AND …", SetCondition), so that the service
// checks the conditions and applies the operations atomically. A condition
// not met is a 412, an *Error that matches idempotent.ErrPreconditionFailed; a
// missing document matches idempotent.ErrNotFound. The response carries no
// document (EnableContentResponseOnWrite stays false), only the new ETag.
func (s *Store) PatchDocument(ctx context.Context, pk, id string, p idempotent.Patch) (string, error) {
	var ops azcosmos.PatchOperations
	if len(p.If) > 0 {
		cond, err := patchCondition(p.If)
		if err != nil {
			return "", &Error{Op: opPatchDocument, PartitionKey: pk, ID: id, Index: -1, Err: err}
		}
		ops.SetCondition(cond)
	}
	for _, op := range p.Ops {
		switch op.Op {
		case idempotent.PatchSet:
			ops.AppendSet(op.Path, op.Value)
		case idempotent.PatchIncrement:
			by, ok := op.Value.(int64)
			if !ok {
				return "", &Error{Op: opPatchDocument, PartitionKey: pk, ID: id, Index: -1, Err: fmt.Errorf("increment %s takes an int64, not %T", op.Path, op.Value)}
			}
			ops.AppendIncrement(op.Path, by)
		default:
			return "", &Error{Op: opPatchDocument, PartitionKey: pk, ID: id, Index: -1, Err: fmt.Errorf("unknown patch operation %q", op.Op)}
		}
	}
	resp, err := s.patchItem(ctx, pk, id, ops)
	if err != nil {
		return "", classifyDocument(opPatchDocument, pk, id, err)
	}
	return string(resp.ETag), nil
}

// WithoutPatch returns s as an idempotent.DocumentStore without
// PatchDocument, so that a caller that patches when its store is an
// idempotent.Patcher applies its conditional changes by a read and an
// ETag-conditioned replace instead. It is for cosmium: cosmium v0.1.20
// applies a patch whatever its condition (api/handlers/documents.go,
// PatchDocument never reads it), so a stale change would overwrite a newer
// one. Cosmos DB and its official emulators evaluate the condition; never
// use it there.
func WithoutPatch(s *Store) idempotent.DocumentStore { return unpatched{s} }

// unpatched hides PatchDocument (see WithoutPatch).
type unpatched struct{ s *Store }

func (u unpatched) ReadDocument(ctx context.Context, pk, id string) ([]byte, string, error) {
	return u.s.ReadDocument(ctx, pk, id)
}

func (u unpatched) CreateBatch(ctx context.Context, pk string, docs []idempotent.Document) ([]string, error) {
	return u.s.CreateBatch(ctx, pk, docs)
}

func (u unpatched) ReplaceDocument(ctx context.Context, pk string, d idempotent.Document, ifMatch string) (string, error) {
	return u.s.ReplaceDocument(ctx, pk, d, ifMatch)
}

// patchCondition renders conditions as a Cosmos DB filter predicate. The SDK
// writes the predicate into the request's JSON without escaping it
// (PatchOperations.MarshalJSON in azcosmos v1.5.0), so a field name must be
// a plain identifier: letters and digits, starting with a letter.
func patchCondition(conds []idempotent.Below) (string, error) {
	var b strings.Builder
	b.WriteString("FROM c WHERE ")
	for i, c := range conds {
		field, ok := strings.CutPrefix(c.Path, "/")
		if !ok || !isIdentifier(field) {
			return "", fmt.Errorf("patch condition path %q is not a top-level field with a plain name", c.Path)
		}
		if i > 0 {
			b.WriteString(" AND ")
		}
		b.WriteString("c.")
		b.WriteString(field)
		b.WriteString(" < ")
		b.WriteString(strconv.FormatInt(c.Value, 10))
	}
	return b.String(), nil
}

func isIdentifier(s string) bool {
	for i, r := range s {
		if !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || i > 0 && '0' <= r && r <= '9') {
			return false
		}
	}
	return s != ""
}

// RequestCharge returns the request units (RU) that Cosmos DB has charged for
// the store's calls so far, failed calls included, as the x-ms-request-charge
// response headers report them. It is safe to call concurrently with the
// other methods; the worker reports differences between two calls.
func (s *Store) RequestCharge() float64 {
	return math.Float64frombits(s.charge.Load())
}

func (s *Store) addCharge(ru float64) {
	if ru <= 0 {
		return
	}
	for {
		old := s.charge.Load()
		if s.charge.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+ru)) {
			return
		}
	}
}

// batchCharge returns the request charge of a transactional batch: the
// response header, or else the sum of the operations' charges.
func batchCharge(resp azcosmos.TransactionalBatchResponse, err error) float64 {
	if ru := headerCharge(resp.RawResponse, err); ru > 0 {
		return ru
	}
	var sum float64
	for _, op := range resp.OperationResults {
		sum += float64(op.RequestCharge)
	}
	return sum
}

func itemCharge(resp azcosmos.ItemResponse, err error) float64 {
	return headerCharge(resp.RawResponse, err)
}

// headerCharge reads the x-ms-request-charge header of a response, or of the
// response carried by an *azcore.ResponseError.
func headerCharge(resp *http.Response, err error) float64 {
	var re *azcore.ResponseError
	if resp == nil && errors.As(err, &re) {
		resp = re.RawResponse
	}
	if resp == nil {
		return 0
	}
	ru, perr := strconv.ParseFloat(resp.Header.Get(headerRequestCharge), 64)
	if perr != nil || math.IsNaN(ru) || math.IsInf(ru, 0) {
		return 0
	}
	return ru
}

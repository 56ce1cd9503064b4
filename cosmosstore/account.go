package cosmosstore

import (
	"context"
	"encoding/json"
	"net/http"
	"runtime"
	"sync"
	"weak"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	azruntime "github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"
)

// SettingMultipleWriteLocations is the account setting Check refuses when
// it is on: enableMultipleWriteLocations in the account's properties (the
// "multi-region writes" switch of the portal, --enable-multiple-write-locations
// of az cosmosdb, enableMultipleWriteLocations of the Bicep resource). With
// it, Cosmos DB accepts a create of the same id in two regions: both
// commit and last-writer-wins merges them without a trace in the conflict
// feed, so two deliveries of one message handled in two regions would both
// see 201 and both act. The duplicate check the pattern rests on (a create
// that fails with 409) holds only with a single write region.
const SettingMultipleWriteLocations = "enableMultipleWriteLocations"

// accountProperties is the part of the account's properties (the answer to
// GET on the account endpoint, which azcosmos reads when it starts and
// every few minutes after) that Check looks at.
type accountProperties struct {
	MultipleWriteLocations bool `json:"enableMultipleWriteLocations"`
	WritableLocations      []struct {
		Name string `json:"name"`
	} `json:"writableLocations"`
}

// accountWatch is an azcore policy that keeps the latest account
// properties that pass through a client's pipeline. azcosmos reads them
// itself but does not export them. It is safe for concurrent use.
type accountWatch struct {
	mu   sync.Mutex
	seen bool
	last accountProperties
}

var _ policy.Policy = (*accountWatch)(nil)

// Do passes req on and, for a successful GET of the account (the
// endpoint's root), keeps the properties its body reports. The body is
// buffered, so the SDK reads it as before.
func (w *accountWatch) Do(req *policy.Request) (*http.Response, error) {
	resp, err := req.Next()
	if err != nil || resp == nil || req.Raw().Method != http.MethodGet || resp.StatusCode/100 != 2 {
		return resp, err
	}
	if p := req.Raw().URL.Path; p != "/" && p != "" {
		return resp, err
	}
	body, perr := azruntime.Payload(resp)
	var props accountProperties
	if perr != nil || json.Unmarshal(body, &props) != nil {
		return resp, err
	}
	w.mu.Lock()
	w.seen, w.last = true, props
	w.mu.Unlock()
	return resp, err
}

// properties returns the latest account properties seen, and whether any
// were.
func (w *accountWatch) properties() (accountProperties, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.last, w.seen
}

// built is what this package knows of a client that NewClient or one of
// its siblings built: the watch in its pipeline and, when ClientOptions
// asked for one, its untraced twin (ClientOptions.Untraced).
type built struct {
	watch    *accountWatch
	untraced *azcosmos.Client               // nil: none
	when     func(ctx context.Context) bool // when to use untraced
}

// clients maps each client that NewClient and its siblings built to what
// this package knows of it, without keeping the client alive.
var clients sync.Map // weak.Pointer[azcosmos.Client] → built

// register records b for c until c is garbage.
func register(c *azcosmos.Client, b built) {
	key := weak.Make(c)
	clients.Store(key, b)
	runtime.AddCleanup(c, func(k weak.Pointer[azcosmos.Client]) { clients.Delete(k) }, key)
}

// builtOf returns what this package knows of c: the zero built for a client
// it did not build.
func builtOf(c *azcosmos.Client) built {
	if b, ok := clients.Load(weak.Make(c)); ok {
		return b.(built)
	}
	return built{}
}

// watchOf returns c's watch, or nil for a client this package did not build.
func watchOf(c *azcosmos.Client) *accountWatch { return builtOf(c).watch }

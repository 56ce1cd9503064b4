package cosmosstore

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/tracing"
	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"
)

// ClientOptions configures the clients that NewClient, NewClientWithKey and
// NewClientFromConnectionString build. Each such client also keeps the
// account's properties as azcosmos reads them, so that Store.Check can
// refuse an account with multiple write locations; a client built with
// azcosmos directly works the same but gives Check no view of the account. A nil *ClientOptions and the zero
// value both mean the SDK's defaults.
type ClientOptions struct {
	// ClientOptions is passed to azcosmos unchanged, except for Transport
	// when InsecureSkipVerify is set.
	azcosmos.ClientOptions

	// InsecureSkipVerify turns off verification of the server's TLS
	// certificate. It exists only for the Cosmos DB emulators, which serve
	// https with a self-signed certificate; never set it for an Azure
	// endpoint. It cannot be combined with a Transport of your own.
	InsecureSkipVerify bool

	// Untraced, with a TracingProvider, reports for the context of a
	// Store's call that the call is to record no spans, such as one under
	// a span the sampler dropped (whose children every sampler the
	// OpenTelemetry specification names drops too). The client then has an
	// untraced twin: a second client of the same account with the same
	// options, credential and transport but no TracingProvider, and a
	// Store on it sends such calls through the twin. The SDK sets up its
	// operation and HTTP spans (attributes, a sanitized URL, a copy of the
	// request) before the tracer sees the context, about 30 allocations
	// and 1.8 KB per call even when no span is recorded; the twin skips
	// them. The twin reads the account's properties on its own first call,
	// as any client does. It must be safe for concurrent use. Nil: no
	// twin.
	Untraced func(ctx context.Context) bool
}

// NewClient returns a client of the Cosmos DB account at endpoint
// ("https://ACCOUNT.documents.azure.com:443/") that authenticates with a
// Microsoft Entra ID credential, such as one from azidentity. This is how the
// worker connects in Azure.
func NewClient(endpoint string, cred azcore.TokenCredential, o *ClientOptions) (*azcosmos.Client, error) {
	if cred == nil {
		return nil, errors.New("cosmosstore: NewClient needs a credential")
	}
	return build(endpoint, o, func(opts *azcosmos.ClientOptions) (*azcosmos.Client, error) {
		return azcosmos.NewClient(endpoint, cred, opts)
	})
}

// NewClientWithKey returns a client of the Cosmos DB account at endpoint that
// authenticates with an account key. Use it for the emulators, such as
// "http://localhost:8081/" with the well-known emulator key; Azure accounts
// deployed by this project disable key authentication.
func NewClientWithKey(endpoint, key string, o *ClientOptions) (*azcosmos.Client, error) {
	cred, err := azcosmos.NewKeyCredential(key)
	if err != nil {
		return nil, fmt.Errorf("cosmosstore: account key: %w", err)
	}
	return build(endpoint, o, func(opts *azcosmos.ClientOptions) (*azcosmos.Client, error) {
		return azcosmos.NewClientWithKey(endpoint, cred, opts)
	})
}

// build builds the client of endpoint that newClient makes with o's
// options, the account watch in its pipeline, and its untraced twin when
// o asks for one (ClientOptions.Untraced), and registers them.
func build(endpoint string, o *ClientOptions, newClient func(*azcosmos.ClientOptions) (*azcosmos.Client, error)) (*azcosmos.Client, error) {
	opts, err := o.sdkOptions()
	if err != nil {
		return nil, err
	}
	w := &accountWatch{}
	opts.PerRetryPolicies = append(slices.Clip(opts.PerRetryPolicies), w)
	c, err := newClient(opts)
	if err != nil {
		return nil, fmt.Errorf("cosmosstore: client for %s: %w", endpoint, err)
	}
	b := built{watch: w}
	if o != nil && o.Untraced != nil && opts.TracingProvider.NewTracer(tracerProbe, "").Enabled() {
		// The same options, so the same transport (the emulator's is made
		// once, in sdkOptions), policies and watch; no spans.
		plain := *opts
		plain.TracingProvider = tracing.Provider{}
		twin, err := newClient(&plain)
		if err != nil {
			return nil, fmt.Errorf("cosmosstore: untraced client for %s: %w", endpoint, err)
		}
		b.untraced, b.when = twin, o.Untraced
	}
	register(c, b)
	return c, nil
}

// tracerProbe is the instrumentation scope build asks a TracingProvider
// for, to learn whether it traces at all.
const tracerProbe = "github.com/idempotent-consumer/sbcosmos/cosmosstore"

// NewClientFromConnectionString returns a client for a connection string of
// the form "AccountEndpoint=URL;AccountKey=KEY;". Key names are
// case-insensitive, the trailing semicolon is optional and other keys are
// ignored. Errors never repeat the account key.
func NewClientFromConnectionString(connectionString string, o *ClientOptions) (*azcosmos.Client, error) {
	endpoint, key, err := parseConnectionString(connectionString)
	if err != nil {
		return nil, err
	}
	return NewClientWithKey(endpoint, key, o)
}

func parseConnectionString(s string) (endpoint, key string, err error) {
	for i, part := range strings.Split(s, ";") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		name, value, ok := strings.Cut(part, "=")
		if !ok {
			return "", "", fmt.Errorf("cosmosstore: connection string: segment %d is not NAME=VALUE", i+1)
		}
		switch {
		case strings.EqualFold(strings.TrimSpace(name), "AccountEndpoint"):
			endpoint = strings.TrimSpace(value)
		case strings.EqualFold(strings.TrimSpace(name), "AccountKey"):
			key = strings.TrimSpace(value)
		}
	}
	switch {
	case endpoint == "":
		return "", "", errors.New("cosmosstore: connection string has no AccountEndpoint")
	case key == "":
		return "", "", errors.New("cosmosstore: connection string has no AccountKey")
	}
	return endpoint, key, nil
}

// sdkOptions returns the azcosmos options for o (never nil), with the
// emulator transport when InsecureSkipVerify is set. It never modifies o.
func (o *ClientOptions) sdkOptions() (*azcosmos.ClientOptions, error) {
	if o == nil {
		return &azcosmos.ClientOptions{}, nil
	}
	opts := o.ClientOptions
	if o.InsecureSkipVerify {
		if opts.Transport != nil {
			return nil, errors.New("cosmosstore: InsecureSkipVerify cannot be combined with a custom Transport")
		}
		opts.Transport = emulatorHTTPClient()
	}
	return &opts, nil
}

// Idle connections the emulator client keeps, as azcosmos v1.5.0's default
// client does (cosmos_default_http_client.go). http.DefaultTransport keeps 2
// per host: with more requests in flight than that, every response beyond
// the second closes its connection and the next request dials (and with TLS
// handshakes) a new one, so a worker at concurrency 16 or 64 against an
// emulator would churn through connections that the Azure path reuses.
const (
	emulatorMaxIdleConns        = 1000
	emulatorMaxIdleConnsPerHost = 100
)

// emulatorHTTPClient is an HTTP client that accepts any server certificate,
// for the emulators' self-signed certificates. Its timeout and idle
// connection limits match the azcosmos default client's.
func emulatorHTTPClient() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns = emulatorMaxIdleConns
	t.MaxIdleConnsPerHost = emulatorMaxIdleConnsPerHost
	t.TLSClientConfig = &tls.Config{
		MinVersion:         tls.VersionTLS12,
		InsecureSkipVerify: true, // the emulator's self-signed certificate; see ClientOptions.InsecureSkipVerify
	}
	return &http.Client{Transport: t, Timeout: 65 * time.Second}
}

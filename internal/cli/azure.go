package cli

import (
	"fmt"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/idempotent-consumer/sbcosmos/cosmosstore"
)

// credential returns the Entra ID credential the commands use in Azure:
// DefaultAzureCredential, which picks the managed identity named by
// AZURE_CLIENT_ID in a Container App and the developer's Azure CLI or azd
// login on a workstation.
func credential() (azcore.TokenCredential, error) {
	cred, err := azidentity.NewDefaultAzureCredential(nil)
	if err != nil {
		return nil, fmt.Errorf("entra id credential: %w", err)
	}
	return cred, nil
}

// RetryOptions are the Service Bus client's retry settings. The SDK's
// defaults (3 retries, 4 s initial delay doubling up to 120 s, with jitter)
// keep a receive or a send retrying for about 40 s before it reports a
// connection failure, while the worker's summaries look healthy and nothing
// is logged. These surface an unreachable broker within about 2 s (retries
// after ≈ 0.5 s and ≈ 1.5 s), so the caller logs it at once; the caller's
// own loop keeps trying (the worker receives again after a pause, the
// producer fails with the error), so giving up sooner loses nothing.
var RetryOptions = azservicebus.RetryOptions{
	MaxRetries:    2,
	RetryDelay:    500 * time.Millisecond,
	MaxRetryDelay: 5 * time.Second,
}

// ClientOptions returns the options NewServiceBusClient uses: RetryOptions.
func ClientOptions() *azservicebus.ClientOptions {
	return &azservicebus.ClientOptions{RetryOptions: RetryOptions}
}

// NewServiceBusClient returns a client for the connection string connStr
// when it is set (the Service Bus emulator or the project's test broker), or
// else for the fully qualified namespace with an Entra ID credential.
func NewServiceBusClient(namespace, connStr string) (*azservicebus.Client, error) {
	if connStr != "" {
		c, err := azservicebus.NewClientFromConnectionString(connStr, ClientOptions())
		if err != nil {
			return nil, fmt.Errorf("service bus connection string: %w", err)
		}
		return c, nil
	}
	cred, err := credential()
	if err != nil {
		return nil, err
	}
	c, err := azservicebus.NewClient(NamespaceHost(namespace), cred, ClientOptions())
	if err != nil {
		return nil, fmt.Errorf("service bus namespace %q: %w", namespace, err)
	}
	return c, nil
}

// NamespaceHost turns "sb://name.servicebus.windows.net/", a bare host or
// a short namespace name into the fully qualified host the SDK wants.
func NamespaceHost(ns string) string {
	ns = strings.TrimSuffix(strings.TrimPrefix(strings.TrimPrefix(ns, "sb://"), "https://"), "/")
	if ns != "" && !strings.Contains(ns, ".") {
		ns += ".servicebus.windows.net"
	}
	return ns
}

// CosmosClient connects to a Cosmos DB account: with key, the account key
// of an emulator, when it is set; otherwise with Entra ID (credential), as
// in Azure. opts may be nil.
func CosmosClient(endpoint, key string, opts *cosmosstore.ClientOptions) (*azcosmos.Client, error) {
	if key != "" {
		return cosmosstore.NewClientWithKey(endpoint, key, opts)
	}
	cred, err := credential()
	if err != nil {
		return nil, err
	}
	return cosmosstore.NewClient(endpoint, cred, opts)
}

package cli

import (
	"fmt"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
)

// Credential returns the Entra ID credential the commands use in Azure:
// DefaultAzureCredential, which picks the managed identity named by
// AZURE_CLIENT_ID in a Container App and the developer's Azure CLI or azd
// login on a workstation.
func Credential() (azcore.TokenCredential, error) {
	cred, err := azidentity.NewDefaultAzureCredential(nil)
	if err != nil {
		return nil, fmt.Errorf("entra id credential: %w", err)
	}
	return cred, nil
}

// NewServiceBusClient returns a client for the connection string connStr
// when it is set (the Service Bus emulator or the project's test broker), or
// else for the fully qualified namespace with an Entra ID credential.
func NewServiceBusClient(namespace, connStr string) (*azservicebus.Client, error) {
	if connStr != "" {
		c, err := azservicebus.NewClientFromConnectionString(connStr, nil)
		if err != nil {
			return nil, fmt.Errorf("service bus connection string: %w", err)
		}
		return c, nil
	}
	cred, err := Credential()
	if err != nil {
		return nil, err
	}
	c, err := azservicebus.NewClient(NamespaceHost(namespace), cred, nil)
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

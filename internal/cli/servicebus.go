package cli

import (
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
)

// ServiceBus is the Service Bus part of a command's configuration: a
// namespace for Entra ID in Azure, or a connection string for an emulator or
// the test broker, and a queue.
type ServiceBus struct {
	Namespace        string // fully qualified namespace (SERVICEBUS_NAMESPACE)
	ConnectionString string // secret; emulators and the test broker only (SERVICEBUS_CONNECTION_STRING)
	Queue            string // SERVICEBUS_QUEUE
}

// Define defines the -namespace, -servicebus-connection-string and -queue
// flags on env, with queueUsage describing the queue.
func (s *ServiceBus) Define(env *Env, queueUsage string) {
	env.String(&s.Namespace, "namespace", "SERVICEBUS_NAMESPACE", "", "fully qualified Service Bus namespace, such as sb-x.servicebus.windows.net (Entra ID auth)")
	env.String(&s.ConnectionString, "servicebus-connection-string", "SERVICEBUS_CONNECTION_STRING", "", "Service Bus connection string, for the emulator or the test broker only (instead of -namespace)")
	env.String(&s.Queue, "queue", "SERVICEBUS_QUEUE", "orders", queueUsage)
}

// Validate reports what is missing or contradictory, naming the variables
// and flags to set.
func (s *ServiceBus) Validate() error {
	var errs []error
	if s.Namespace == "" && s.ConnectionString == "" {
		errs = append(errs, errors.New("set SERVICEBUS_NAMESPACE (-namespace) or, for an emulator, SERVICEBUS_CONNECTION_STRING (-servicebus-connection-string)"))
	}
	if s.Namespace != "" && s.ConnectionString != "" {
		errs = append(errs, errors.New("set only one of SERVICEBUS_NAMESPACE and SERVICEBUS_CONNECTION_STRING"))
	}
	if s.Namespace != "" {
		if err := checkNamespace(s.Namespace); err != nil {
			errs = append(errs, fmt.Errorf("SERVICEBUS_NAMESPACE (-namespace): %w", err))
		}
	}
	if s.ConnectionString != "" {
		if err := CheckConnectionString(s.ConnectionString); err != nil {
			errs = append(errs, fmt.Errorf("SERVICEBUS_CONNECTION_STRING (-servicebus-connection-string): %w", err))
		}
	}
	if s.Queue == "" {
		errs = append(errs, errors.New("set SERVICEBUS_QUEUE (-queue)"))
	}
	return errors.Join(errs...)
}

// checkNamespace reports a namespace that NamespaceHost cannot turn into a
// host name: a URL with a path, a port, white space or an empty label.
func checkNamespace(ns string) error {
	host := NamespaceHost(ns)
	if strings.ContainsAny(host, " /:?#@;=") || strings.Contains(host, "..") || strings.HasPrefix(host, ".") || strings.HasSuffix(host, ".") {
		return fmt.Errorf("%q is not a namespace host such as sb-x.servicebus.windows.net", ns)
	}
	return nil
}

// CheckConnectionString reports what keeps cs from being a Service Bus
// connection string the SDK can use, without revealing the secret: it needs
// Endpoint=sb://<host>[:port][/], and either SharedAccessKeyName with
// SharedAccessKey or a SharedAccessSignature. The SDK checks the same only
// when it connects, and without naming the variable.
func CheckConnectionString(cs string) error {
	fields := map[string]string{}
	for _, part := range strings.Split(cs, ";") {
		if strings.TrimSpace(part) == "" {
			continue
		}
		k, v, ok := strings.Cut(part, "=")
		if !ok {
			return fmt.Errorf("a part without '=' (want Key=Value;Key=Value)")
		}
		fields[strings.ToLower(strings.TrimSpace(k))] = strings.TrimSpace(v)
	}
	var errs []error
	switch ep := fields["endpoint"]; {
	case ep == "":
		errs = append(errs, errors.New("no Endpoint=sb://<host>"))
	default:
		u, err := url.Parse(ep)
		if err != nil || u.Scheme != "sb" || u.Host == "" || strings.Trim(u.Path, "/") != "" {
			errs = append(errs, fmt.Errorf("Endpoint %q is not sb://<host>[:port]", ep))
		}
	}
	_, sas := fields["sharedaccesssignature"]
	if !sas && (fields["sharedaccesskeyname"] == "" || fields["sharedaccesskey"] == "") {
		errs = append(errs, errors.New("needs SharedAccessKeyName and SharedAccessKey (or SharedAccessSignature)"))
	}
	return errors.Join(errs...)
}

// CheckEndpoint reports an HTTP endpoint that is not an absolute http or
// https URL with a host, such as https://x.documents.azure.com:443/.
func CheckEndpoint(endpoint string) error {
	u, err := url.Parse(endpoint)
	if err != nil {
		return fmt.Errorf("%q is not a URL: %w", endpoint, err)
	}
	if (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return fmt.Errorf("%q is not an http(s)://host[:port]/ URL", endpoint)
	}
	return nil
}

// NewClient returns a client for the connection string or, without one, for
// the namespace with an Entra ID credential.
func (s *ServiceBus) NewClient() (*azservicebus.Client, error) {
	return NewServiceBusClient(s.Namespace, s.ConnectionString)
}

// LogAttrs returns the settings for a log record, the connection string
// masked.
func (s *ServiceBus) LogAttrs() []slog.Attr {
	return []slog.Attr{
		slog.String("servicebus_namespace", s.Namespace),
		slog.String("servicebus_connection_string", Mask(s.ConnectionString)),
		slog.String("queue", s.Queue),
	}
}

// The longest topic and subscription names Service Bus accepts.
const (
	MaxTopicName        = 260
	MaxSubscriptionName = 50
)

// CheckEntityName reports a Service Bus entity name that Service Bus
// refuses: longer than max characters, or with a character other than a
// letter, digit, '.', '-', '_' (and, with slash, '/' in a topic's name, not
// at either end).
func CheckEntityName(name string, max int, slash bool) error {
	if len(name) > max {
		return fmt.Errorf("%q has %d characters; Service Bus allows %d", name, len(name), max)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c == '/' && slash && i > 0 && i < len(name)-1 {
			continue
		}
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("%q: character %q is not a letter, digit, '.', '-' or '_'", name, c)
		}
	}
	return nil
}

package cli

import (
	"context"
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
	env.Secret(&s.ConnectionString, "servicebus-connection-string", "SERVICEBUS_CONNECTION_STRING", "", "Service Bus connection string, for the emulator or the test broker only (instead of -namespace)")
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
		if err := checkConnectionString(s.ConnectionString); err != nil {
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

// checkConnectionString reports what keeps cs from being a Service Bus
// connection string the SDK can use, without revealing the secret: it needs
// Endpoint=sb://<host>[:port][/], and either SharedAccessKeyName with
// SharedAccessKey or a SharedAccessSignature. The SDK checks the same only
// when it connects, and without naming the variable.
func checkConnectionString(cs string) error {
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
// The error shows the endpoint as MaskURL does, since it may carry
// credentials.
func CheckEndpoint(endpoint string) error {
	u, err := url.Parse(endpoint)
	if err != nil {
		var uerr *url.Error // its text repeats the URL
		if errors.As(err, &uerr) {
			err = uerr.Err
		}
		return fmt.Errorf("%q is not a URL: %w", MaskURL(endpoint), err)
	}
	if (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return fmt.Errorf("%q is not an http(s)://host[:port]/ URL", MaskURL(endpoint))
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

// The Service Bus entities a command uses, with the settings that name
// them, for ExplainServiceBus.
const (
	// QueueSetting names the queue.
	QueueSetting = "SERVICEBUS_QUEUE (-queue)"
	// TopicSetting names the topic.
	TopicSetting = "SERVICEBUS_TOPIC (-topic)"
	// SubscriptionSettings name a subscription: its topic and its name.
	SubscriptionSettings = "SERVICEBUS_TOPIC (-topic) and SERVICEBUS_SUBSCRIPTION (-subscription)"
)

// Explain is ExplainServiceBus for s's namespace or connection string.
func (s *ServiceBus) Explain(err error, entity, settings string) error {
	return ExplainServiceBus(err, s.Namespace, s.ConnectionString, entity, settings)
}

// ExplainServiceBus returns err, the failure of a command's first call to
// Service Bus on entity (such as `queue "orders"`), with the setting to fix
// in front of it, as the SDK's error does not say: for a missing entity
// (CodeNotFound) the settings that name it, for a refused credential
// (CodeUnauthorizedAccess) SERVICEBUS_CONNECTION_STRING or the identity's
// role on SERVICEBUS_NAMESPACE, for an unreachable broker (CodeConnectionLost,
// a timeout) the endpoint, with the connection string connStr when it is
// set, else the namespace. Other errors, and nil, are returned unchanged.
// The connection string's key is never shown.
func ExplainServiceBus(err error, namespace, connStr, entity, settings string) error {
	if err == nil {
		return nil
	}
	where := fmt.Sprintf("namespace %s (SERVICEBUS_NAMESPACE)", NamespaceHost(namespace))
	if connStr != "" {
		where = fmt.Sprintf("the broker at %s (the Endpoint of SERVICEBUS_CONNECTION_STRING)", connectionEndpoint(connStr))
	}
	var sbErr *azservicebus.Error
	code := azservicebus.Code("")
	if errors.As(err, &sbErr) {
		code = sbErr.Code
	}
	var hint string
	switch {
	case code == azservicebus.CodeNotFound:
		hint = fmt.Sprintf("%s does not exist in %s: set %s to one that exists there, or create it", entity, where, settings)
	case code == azservicebus.CodeUnauthorizedAccess && connStr != "":
		hint = fmt.Sprintf("%s refused the key of SERVICEBUS_CONNECTION_STRING (-servicebus-connection-string) for %s: "+
			"set it to the connection string of this broker (the emulator and the test broker take SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey=SAS_KEY_VALUE)", where, entity)
	case code == azservicebus.CodeUnauthorizedAccess:
		hint = fmt.Sprintf("%s refused this identity access to %s: assign it the role Azure Service Bus Data Receiver (to receive or peek) or Data Sender (to send) on the namespace "+
			"(AZURE_CLIENT_ID names the managed identity; a new role assignment takes a few minutes to apply), or check SERVICEBUS_NAMESPACE (-namespace)", where, entity)
	case code == azservicebus.CodeConnectionLost || code == azservicebus.CodeTimeout || errors.Is(err, context.DeadlineExceeded):
		fix := "check SERVICEBUS_NAMESPACE (-namespace) and the network"
		if connStr != "" {
			fix = "check the Endpoint of SERVICEBUS_CONNECTION_STRING (-servicebus-connection-string) and that the broker runs"
		}
		hint = fmt.Sprintf("cannot reach %s for %s: %s", where, entity, fix)
	default:
		return err
	}
	return fmt.Errorf("%s: %w", hint, err)
}

// connectionEndpoint returns the host and port of a connection string's
// Endpoint, or "?" when it has none.
func connectionEndpoint(cs string) string {
	for _, part := range strings.Split(cs, ";") {
		k, v, ok := strings.Cut(part, "=")
		if !ok || !strings.EqualFold(strings.TrimSpace(k), "endpoint") {
			continue
		}
		if u, err := url.Parse(strings.TrimSpace(v)); err == nil && u.Host != "" {
			return u.Host
		}
		return strings.TrimSpace(v)
	}
	return "?"
}

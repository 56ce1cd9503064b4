package cli

import (
	"errors"
	"log/slog"

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
	if s.Queue == "" {
		errs = append(errs, errors.New("set SERVICEBUS_QUEUE (-queue)"))
	}
	return errors.Join(errs...)
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

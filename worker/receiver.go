package worker

import (
	"context"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
)

// Receiver is the part of *azservicebus.Receiver the worker uses. It is the
// seam that lets the loop run against a fake in tests and against the
// in-process queue model in the simulation.
//
// ReceiveMessages is called from one goroutine at a time; the settlement
// methods and RenewMessageLock are called concurrently.
type Receiver interface {
	ReceiveMessages(ctx context.Context, maxMessages int, o *azservicebus.ReceiveMessagesOptions) ([]*azservicebus.ReceivedMessage, error)
	CompleteMessage(ctx context.Context, m *azservicebus.ReceivedMessage, o *azservicebus.CompleteMessageOptions) error
	AbandonMessage(ctx context.Context, m *azservicebus.ReceivedMessage, o *azservicebus.AbandonMessageOptions) error
	DeadLetterMessage(ctx context.Context, m *azservicebus.ReceivedMessage, o *azservicebus.DeadLetterOptions) error
	RenewMessageLock(ctx context.Context, m *azservicebus.ReceivedMessage, o *azservicebus.RenewMessageLockOptions) error
}

var _ Receiver = (*azservicebus.Receiver)(nil)

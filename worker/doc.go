// Package worker runs the PeekLock receive loop of the idempotent order
// consumer: one goroutine receives from Service Bus, a bounded number of
// handlers process messages concurrently, each under its own deadline and with
// its lock renewed while it runs, and every result is settled by one switch
// over the outcome.
//
// # Delivery contract
//
// Service Bus delivers at least once, so every message may be handled more
// than once, by this worker or another. The worker never relies on a
// settlement succeeding: when a complete, abandon or dead-letter fails (the
// lock was lost, the link dropped), the message comes back and the handler's
// idempotency turns the redelivery into a harmless duplicate.
//
// # Shutdown
//
// When Run's context is cancelled the worker stops receiving, lets in-flight
// handlers finish and settle within Options.ShutdownGrace, then cancels the
// rest (their messages are abandoned or left to their lock's expiry) and
// returns. Closing the Service Bus client is the caller's job, after Run
// returns.
package worker

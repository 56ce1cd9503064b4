// Package workertest is the hand-written test kit for package worker and
// its options: a fake Service Bus receiver, a slog handler that captures
// records, and helpers that start and stop a worker.
//
// Use it from a _test file:
//
//	r := workertest.NewReceiver("m1", "m2")
//	done := workertest.SettledN(r, 2)
//	w := workertest.NewWorker(t, r, handler, worker.Options{})
//	stop := workertest.Start(t, w)
//	workertest.Wait(t, done, "two settlements")
//	if err := stop(); err != nil {
//		t.Fatal(err)
//	}
//	got := r.Settlements("m1") // []workertest.Settlement{{Kind: "complete"}}
//
// It serves the tests of worker, worker/breaker and worker/otelworker, and
// an importer who tests its own handler with package worker: the fake
// settles, renews and fails as the SDK's receiver does, with no broker.
//
// Proof tooling: product code must not import it; product packages' tests
// may. Every type is safe for concurrent use, like the SDK's receiver;
// the hook fields of Receiver are set before the worker runs.
package workertest

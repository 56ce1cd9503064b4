// Package paymentservice is the reference payments service of package
// payments, for tests, the simulation and the standalone command
// cmd/paymentservice: serve a [Service] over HTTP (httptest.NewServer, or
// any http.Server) and point a payments.Client at it.
//
//	svc := paymentservice.NewService(nil)
//	srv := httptest.NewServer(svc)
//	client, err := payments.NewClient(srv.URL, nil)
//
// It implements the API that package payments documents: captures that
// charge once per idempotency key (POST /payments), the ledger lookup
// (GET /payments?orderId=), GET /payments/{paymentId}, the probe that asks
// whether a capture would go through (POST /payments/probe) and
// GET /healthz. It counts the charges it performed ([Service.Charges],
// [Service.ChargesFor]), so a test can check that every order was charged
// exactly once; a probe is never one.
//
// Failures are injected two ways: [ServiceOptions.Faults] decides request
// by request (a capture or a probe, told apart by [FaultRequest].Kind), and
// [Service.SetOutage] fails every capture and probe until it is ended, as
// an outage of the acquirer behind a healthy API does ([AcquirerOutage]).
package paymentservice

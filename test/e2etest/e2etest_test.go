package e2etest_test

import (
	"testing"

	"github.com/idempotent-consumer/sbcosmos/test/e2etest"
)

func TestParseProducerSummary(t *testing.T) {
	out := "some log\nsent 12 of 12 messages to orders-itest in 1.5s (8 msg/s): 10 orders, 1 duplicates, 1 reused ids, 0 malformed, 2 status changes; id prefix itest-1, seed 42\n"
	s, err := e2etest.ParseProducerSummary(out)
	want := e2etest.ProducerSummary{Sent: 12, Total: 12, Orders: 10, Duplicates: 1, Reused: 1, StatusChanges: 2, Queue: "orders-itest", Prefix: "itest-1", Seed: 42}
	if err != nil || s != want {
		t.Errorf("ParseProducerSummary = %+v, %v; want %+v", s, err, want)
	}
	if _, err := e2etest.ParseProducerSummary("nothing"); err == nil {
		t.Error("no error without a summary line")
	}
}

func TestFinalSummary(t *testing.T) {
	logs := `{"msg":"summary","created":1}` + "\n" + `{"msg":"final summary","created":3,"received":4}` + "\n"
	if s := e2etest.FinalSummary(logs); s["created"] != 3 || s["received"] != 4 {
		t.Errorf("FinalSummary = %v", s)
	}
	if e2etest.FinalSummary("{}") != nil {
		t.Error("a summary from nothing")
	}
}

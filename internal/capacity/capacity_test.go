package capacity_test

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/idempotent-consumer/sbcosmos/internal/capacity"
)

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-6*math.Max(1, math.Abs(b)) }

func TestPathRoundTripsAndRU(t *testing.T) {
	for _, tt := range []struct {
		id    capacity.PathID
		trips int
		ru    float64
	}{
		{capacity.OrderNew, 1, 11},              // batch of 2 creates: 2 × 5.5
		{capacity.OrderNewReadFirst, 2, 12},     // the miss 1 + the batch 11
		{capacity.OrderCopy, 2, 12},             // the refused batch 11 + the read 1
		{capacity.OrderCopyReadFirst, 1, 1},     // the read
		{capacity.OrderRedelivery, 1, 1},        // the read
		{capacity.OrderCopyCached, 0, 0},        // the fact cache
		{capacity.OrderMismatch, 2, 12},         // as a copy
		{capacity.OrderInvalid, 0, 0},           // nothing sent
		{capacity.PaymentNew, 2, 27.5},          // batch of 3 creates 16.5 + the completed mark's replace 11
		{capacity.PaymentNewReadFirst, 3, 28.5}, // the miss 1 + 27.5
		{capacity.PaymentCopy, 2, 17.5},         // the refused batch of 3, 16.5 + the read 1
		{capacity.StatusApplied, 1, 11},         // a patch, charged as a replace
		{capacity.StatusStaleRedeliver, 1, 1},   // the read
		{capacity.StatusStaleFirst, 2, 12},      // the refused patch 11 + the read 1
		{capacity.StatusBeforeOrder, 1, 11},     // the refused patch
		{capacity.InboxNew, 1, 11},              // marker and entry: 2 × 5.5
		{capacity.InboxRedelivery, 1, 1},        // the marker's read
		{capacity.InboxCopy, 2, 12},             // the refused batch 11 + the read 1
	} {
		p, ok := capacity.PathOf(tt.id)
		if !ok {
			t.Errorf("%s: unknown", tt.id)
			continue
		}
		if p.RoundTrips() != tt.trips || !near(p.RU(), tt.ru) {
			t.Errorf("%s: %d round trips, %v RU; want %d, %v", tt.id, p.RoundTrips(), p.RU(), tt.trips, tt.ru)
		}
	}
	if n := len(capacity.Paths()); n != 18 {
		t.Errorf("Paths() has %d paths, want the 18 above", n)
	}
}

// bare is the dev profile without the relay and subscribers.
func bare() capacity.Inputs {
	in := capacity.DefaultInputs(capacity.ProfileDev)
	in.Relay, in.Subscribers = false, nil
	return in
}

func TestCompute(t *testing.T) {
	for _, tt := range []struct {
		name      string
		in        func(*capacity.Inputs)
		readFirst bool
		rus       map[string]float64 // by container
		credits   float64
		mbps      float64
	}{
		{name: "new orders only", in: func(in *capacity.Inputs) { in.Rate = 100 },
			rus: map[string]float64{"orders": 1100}, credits: 200, mbps: 200.0 / 1024},
		{name: "half copies: still create first", in: func(in *capacity.Inputs) { in.Rate, in.Duplicates = 100, 0.5 },
			rus: map[string]float64{"orders": 50*11 + 50*12}, credits: 200, mbps: 200.0 / 1024},
		{name: "copies above 9/16 of first deliveries: read first", in: func(in *capacity.Inputs) { in.Rate, in.Duplicates, in.Redeliveries = 100, 0.5, 0.2 },
			readFirst: true, rus: map[string]float64{"orders": 30*12 + 50*1 + 20*1}, credits: 200, mbps: 200.0 / 1024},
		{name: "two status changes per order", in: func(in *capacity.Inputs) { in.Rate, in.StatusChanges = 100, 2 },
			rus: map[string]float64{"orders": 100*11 + 200*11}, credits: 600, mbps: 600.0 / 1024},
		{name: "payments", in: func(in *capacity.Inputs) { in.Rate, in.Duplicates, in.Payments = 200, 0.1, true },
			rus: map[string]float64{"orders": 180*27.5 + 20*17.5}, credits: 400, mbps: 400.0 / 1024},
		{name: "relay and two subscribers", in: func(in *capacity.Inputs) {
			in.Rate, in.Relay, in.Subscribers = 100, true, []string{"loyalty", "shipping"}
		}, rus: map[string]float64{
			"orders":   1100 + 200,            // + the feed: 200 changes/s read at 1 RU each
			"loyalty":  1100,                  // one batch of 2 per event
			"shipping": 1100,                  //
			"leases":   (1.0/1 + 3.0/30) * 11, // a checkpoint per second (RELAY_CHECKPOINT_INTERVAL), a renewal per 10 s
		}, credits: 100 + 100 + 100 + 200 + 200, // queue send, receive; topic send; 2 filter evaluations; 2 receives
			mbps: (100 + 100 + 100 + 200) / 1024.0},
		{name: "large messages", in: func(in *capacity.Inputs) { in.Rate, in.MessageKB = 10, 200 },
			rus: map[string]float64{"orders": 110}, credits: 20, mbps: 20 * 200 / 1024.0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			in := bare()
			tt.in(&in)
			if err := in.Validate(); err != nil {
				t.Fatal(err)
			}
			p := capacity.Compute(in)
			if p.ReadFirst != tt.readFirst {
				t.Errorf("ReadFirst = %v, want %v (copy share %v)", p.ReadFirst, tt.readFirst, p.CopyShare)
			}
			got := map[string]float64{}
			for _, c := range p.Containers {
				got[c.Name] = c.RUs
			}
			if len(got) != len(tt.rus) {
				t.Errorf("containers %v, want %v", got, tt.rus)
			}
			for name, want := range tt.rus {
				if !near(got[name], want) {
					t.Errorf("container %s: %v RU/s, want %v", name, got[name], want)
				}
			}
			if !near(p.Credits, tt.credits) || !near(p.MBps, tt.mbps) {
				t.Errorf("Service Bus: %v credits/s, %v MB/s; want %v, %v", p.Credits, p.MBps, tt.credits, tt.mbps)
			}
		})
	}
}

func TestFirstLimit(t *testing.T) {
	for _, tt := range []struct {
		name    string
		in      func(*capacity.Inputs)
		first   string
		maxRate float64
	}{
		{"dev, no relay: the serverless orders container", func(in *capacity.Inputs) {}, "Cosmos DB serverless container orders", 5000.0 / 11},
		{"dev, two subscribers, payments: Standard's credits", func(in *capacity.Inputs) {
			*in = capacity.DefaultInputs(capacity.ProfileDev)
			in.Rate, in.Duplicates, in.Payments = 200, 0.1, true
		}, "Service Bus Standard namespace", 200 * 1000.0 / 1300},
		{"production: the database's shared 1,000 RU/s", func(in *capacity.Inputs) {
			*in = capacity.DefaultInputs(capacity.ProfileProduction)
		}, "Cosmos DB database throughput, shared by its containers", 100 * 1000 / (1100 + 200 + 2200 + (1.0/1+0.1)*11)}, // a checkpoint a second, a renewal per 10 s
		{"one slow worker", func(in *capacity.Inputs) {
			in.Concurrency, in.Workers, in.CosmosLatency = 1, 1, 90*time.Millisecond
		}, "workers: replicas × concurrency ÷ latency", 10}, // 1 ÷ (90 ms + 10 ms)
		{"Premium, 1 MB messages", func(in *capacity.Inputs) {
			in.Cosmos, in.CosmosRUs, in.ServiceBus, in.MessagingUnit, in.MessageKB = capacity.Provisioned, 100_000, capacity.Premium, 1, 1024
		}, "Service Bus Premium namespace", 2}, // 4 MB/s ÷ 2 MB per message (in and out)
		{"a relay reading one change per page", func(in *capacity.Inputs) {
			*in = capacity.DefaultInputs(capacity.ProfileDev)
			in.RelayPageSize = 1
		}, "relay: page size ÷ cycle, per feed range", 100 * (1 / 0.020) / 200}, // a read and a send per page
		{"a small subscriber", func(in *capacity.Inputs) {
			*in = capacity.DefaultInputs(capacity.ProfileDev)
			in.SubscriberReplicas, in.Concurrency = 1, 1
		}, "subscriber loyalty: replicas × concurrency ÷ latency", 50}, // 1 ÷ 20 ms, one event per order
	} {
		t.Run(tt.name, func(t *testing.T) {
			in := bare()
			tt.in(&in)
			if err := in.Validate(); err != nil {
				t.Fatal(err)
			}
			p := capacity.Compute(in)
			if p.First.Name != tt.first || !near(p.First.MaxRate, tt.maxRate) {
				t.Errorf("first limit %q at %v messages/s, want %q at %v", p.First.Name, p.First.MaxRate, tt.first, tt.maxRate)
			}
			for _, l := range p.Limits {
				if l.MaxRate < p.First.MaxRate {
					t.Errorf("%q is reached at %v, before the first %q", l.Name, l.MaxRate, p.First.Name)
				}
			}
		})
	}
}

func TestNeeds(t *testing.T) {
	for _, tt := range []struct {
		name string
		in   func(*capacity.Inputs)
		want capacity.Needs
	}{
		{"the dev profile at 100/s", func(in *capacity.Inputs) { *in = capacity.DefaultInputs(capacity.ProfileDev) },
			capacity.Needs{WorkerReplicas: 1, WorkerConcurrency: 8, SubscriberReplicas: 1, ServiceBus: capacity.Standard, Cosmos: capacity.Serverless}},
		{"2,000/s: Premium with 4 units, 70,100 RU/s", func(in *capacity.Inputs) {
			*in = capacity.DefaultInputs(capacity.ProfileDev)
			in.Rate = 2000 // 14,000 credits/s; 9.8 MB/s; 70,012 RU/s over four containers (a checkpoint a second)
		}, capacity.Needs{WorkerReplicas: 5, WorkerConcurrency: 8, SubscriberReplicas: 5, ServiceBus: capacity.Premium, MessagingUnits: 4,
			Cosmos: capacity.Provisioned, CosmosRUs: 70_100}},
		{"more replicas than allowed: the concurrency instead", func(in *capacity.Inputs) {
			in.Rate = 10_000 // 400/s per replica at 20 ms: 25 replicas, or concurrency 20 on 10
		}, capacity.Needs{WorkerReplicas: 25, WorkerConcurrency: 20, ServiceBus: capacity.Premium, MessagingUnits: 8,
			Cosmos: capacity.Provisioned, CosmosRUs: 110_000}},
		{"beyond 16 messaging units", func(in *capacity.Inputs) { in.Rate, in.MessageKB = 1000, 100 },
			capacity.Needs{WorkerReplicas: 3, WorkerConcurrency: 8, ServiceBus: capacity.Premium, MessagingUnits: 0,
				Cosmos: capacity.Provisioned, CosmosRUs: 11_000}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			in := bare()
			tt.in(&in)
			if err := in.Validate(); err != nil {
				t.Fatal(err)
			}
			if got := capacity.Compute(in).Needs; got != tt.want {
				t.Errorf("Needs = %+v\nwant    %+v", got, tt.want)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	for _, p := range []string{capacity.ProfileDev, capacity.ProfileProduction} {
		if err := capacity.DefaultInputs(p).Validate(); err != nil {
			t.Errorf("DefaultInputs(%s): %v", p, err)
		}
	}
	bad := capacity.Inputs{Rate: -1, Duplicates: 1.5, Redeliveries: -0.1, StatusChanges: -1, Subscribers: []string{"a", "a", ""},
		Cosmos: "cassandra", ServiceBus: "basic", MessageKB: 0, Concurrency: 0, Workers: 301, SubscriberReplicas: 0,
		Relay: true, RelayPageSize: 0, RelayPoll: -1, RelayCheckpoint: 0}
	err := bad.Validate()
	if err == nil {
		t.Fatal("Validate() = nil")
	}
	for _, want := range []string{"-rate", "-duplicates", "-redeliveries", "-status-changes", `"a" is named twice`, `"" is not`,
		"-cosmos", "-servicebus", "-message-kb", "-concurrency", "-workers", "-subscriber-replicas", "-cosmos-latency",
		"-settle-latency", "-payment-latency", "-relay-page-size", "-relay-lease", "-relay-poll", "-relay-checkpoint"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Validate() does not report %s:\n%v", want, err)
		}
	}
	for _, tt := range []struct {
		name string
		in   func(*capacity.Inputs)
		want string
	}{
		{"shares over 1", func(in *capacity.Inputs) { in.Duplicates, in.Redeliveries = 0.6, 0.6 }, "add up to more than 1"},
		{"subscribers without the relay", func(in *capacity.Inputs) { in.Relay = false }, "without -relay"},
		{"RU/s on serverless", func(in *capacity.Inputs) { in.CosmosRUs = 400 }, "serverless has no throughput"},
		{"provisioned in odd steps", func(in *capacity.Inputs) { in.Cosmos, in.CosmosRUs = capacity.Provisioned, 450 }, "multiple of 100"},
		{"units on Standard", func(in *capacity.Inputs) { in.MessagingUnit = 2 }, "Premium's"},
		{"3 units", func(in *capacity.Inputs) { in.ServiceBus, in.MessagingUnit = capacity.Premium, 3 }, "1, 2, 4, 8 or 16"},
		{"1 MB messages on Standard", func(in *capacity.Inputs) { in.MessageKB = 1024 }, "over Service Bus Standard's 256 KB"},
	} {
		in := capacity.DefaultInputs(capacity.ProfileDev)
		tt.in(&in)
		if err := in.Validate(); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: Validate() = %v, want %q", tt.name, err, tt.want)
		}
	}
}

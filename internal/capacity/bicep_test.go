package capacity_test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/idempotent-consumer/sbcosmos/internal/capacity"
	"github.com/idempotent-consumer/sbcosmos/relay"
)

// TestDefaultsAgreeWithBicep compares DefaultInputs with what infra/bicep
// deploys for each profile: the Cosmos DB throughput, the Service Bus tier
// and units, the worker's and the subscribers' most replicas, the
// subscriptions, and the worker's concurrency and the relay's settings,
// which the Bicep leaves at the binaries' defaults.
func TestDefaultsAgreeWithBicep(t *testing.T) {
	read := func(parts ...string) string {
		b, err := os.ReadFile(filepath.Join(append([]string{"..", ".."}, parts...)...))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	param := func(src, name string) string {
		m := regexp.MustCompile(`(?m)^param ` + name + ` \w+ = '?([^'\n]*?)'?\s*$`).FindStringSubmatch(src)
		if m == nil {
			t.Fatalf("no param %s", name)
		}
		return m[1]
	}
	atoi := func(s string) int {
		n, err := strconv.Atoi(s)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	main := read("infra", "bicep", "main.bicep")
	apps := read("infra", "bicep", "modules", "containerapps.bicep")
	cosmos := read("infra", "bicep", "modules", "cosmos.bicep")
	bus := read("infra", "bicep", "modules", "servicebus.bicep")
	worker := read("cmd", "orderworker", "config.go")

	dev, prod := capacity.DefaultInputs(capacity.ProfileDev), capacity.DefaultInputs(capacity.ProfileProduction)
	for _, in := range []capacity.Inputs{dev, prod} {
		if got := atoi(param(main, "workerMaxReplicas")); in.Workers != got {
			t.Errorf("Workers %d, main.bicep workerMaxReplicas %d", in.Workers, got)
		}
		if got := atoi(param(apps, "subscriberMaxReplicas")); in.SubscriberReplicas != got {
			t.Errorf("SubscriberReplicas %d, containerapps.bicep subscriberMaxReplicas %d", in.SubscriberReplicas, got)
		}
		subs := []string{param(main, "loyaltySubscriptionName"), param(main, "shippingSubscriptionName")}
		if !slices.Equal(in.Subscribers, subs) || !in.Relay {
			t.Errorf("Subscribers %v relay %v, main.bicep deploys the relay and %v", in.Subscribers, in.Relay, subs)
		}
		if m := regexp.MustCompile(`"WORKER_CONCURRENCY", (\d+),`).FindStringSubmatch(worker); m == nil || atoi(m[1]) != in.Concurrency {
			t.Errorf("Concurrency %d, orderworker's WORKER_CONCURRENCY default %v (the Bicep sets none)", in.Concurrency, m)
		}
		for _, v := range []string{"WORKER_CONCURRENCY", "RELAY_PAGE_SIZE", "RELAY_LEASE_DURATION", "RELAY_POLL_INTERVAL", "RELAY_CHECKPOINT_INTERVAL"} {
			if strings.Contains(apps, v) {
				t.Errorf("containerapps.bicep sets %s: compare with it, not with the binaries' defaults", v)
			}
		}
		if in.RelayPageSize != relay.DefaultPageSize || in.RelayLease != relay.DefaultLeaseDuration ||
			in.RelayPoll != relay.DefaultPollInterval || in.RelayCheckpoint != relay.DefaultCheckpointInterval {
			t.Errorf("relay page size %d, lease %v, poll %v, checkpoint %v; relay defaults %d, %v, %v, %v", in.RelayPageSize, in.RelayLease, in.RelayPoll, in.RelayCheckpoint,
				relay.DefaultPageSize, relay.DefaultLeaseDuration, relay.DefaultPollInterval, relay.DefaultCheckpointInterval)
		}
	}
	// dev: serverless and Standard; production: the database's autoscale
	// maximum and Premium's capacity.
	if !strings.Contains(cosmos, "capabilities: production ? [] : [") || !strings.Contains(cosmos, "name: 'EnableServerless'") || dev.Cosmos != capacity.Serverless {
		t.Errorf("dev Cosmos %q, cosmos.bicep's dev profile: serverless", dev.Cosmos)
	}
	if got := atoi(param(cosmos, "autoscaleMaxThroughput")); prod.Cosmos != capacity.Provisioned || prod.CosmosRUs != float64(got) {
		t.Errorf("production Cosmos %q %v RU/s, cosmos.bicep autoscaleMaxThroughput %d", prod.Cosmos, prod.CosmosRUs, got)
	}
	m := regexp.MustCompile(`sku: production \? \{\s*name: 'Premium'\s*tier: 'Premium'\s*capacity: (\d+)\s*\} : \{\s*name: 'Standard'`).FindStringSubmatch(bus)
	if m == nil {
		t.Fatal("servicebus.bicep: no sku of the form production ? Premium with a capacity : Standard")
	}
	if dev.ServiceBus != capacity.Standard || prod.ServiceBus != capacity.Premium || prod.MessagingUnit != atoi(m[1]) {
		t.Errorf("Service Bus dev %s, production %s with %d units; servicebus.bicep: Standard, Premium with %s", dev.ServiceBus, prod.ServiceBus, prod.MessagingUnit, m[1])
	}
}

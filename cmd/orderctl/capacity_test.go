package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/idempotent-consumer/sbcosmos/internal/capacity"
	"github.com/idempotent-consumer/sbcosmos/internal/cli"
)

func runPlanCmd(t *testing.T, env map[string]string, args ...string) (string, string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err := run(context.Background(), append([]string{"plan"}, args...), func(k string) string { return env[k] }, &out, &errOut)
	return out.String(), errOut.String(), err
}

// TestPlan_Table: orderctl plan needs no Azure setting and prints every
// section, the first limit and the sources.
func TestPlan_Table(t *testing.T) {
	out, _, err := runPlanCmd(t, nil, "-rate", "200", "-duplicates", "0.1", "-payments", "-subscribers", "loyalty,shipping")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"Plan for 200 order messages/s: 10 % copies",
		"Cosmos DB requests per message",
		"payment-new   180",
		"Service Bus operations",
		"Ceilings: the first reached is Service Bus Standard namespace, at 154 order messages/s",
		"Needs at 200 order messages/s",
		"Service Bus: Premium, 1 messaging unit(s)",
		capacity.SourceOptimizeCost,
		capacity.SourceSBThrottling,
		"estimate: Microsoft publishes no charge for a rejected write",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// TestPlan_JSONAndProfile: -format json prints the plan as JSON, and
// DEPLOY_PROFILE=production plans on that profile's shape.
func TestPlan_JSONAndProfile(t *testing.T) {
	out, _, err := runPlanCmd(t, map[string]string{"DEPLOY_PROFILE": "production"}, "-format", "json", "-subscribers", "")
	if err != nil {
		t.Fatal(err)
	}
	var p capacity.Plan
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	if p.Inputs.Cosmos != capacity.Provisioned || p.Inputs.CosmosRUs != 1000 || p.Inputs.ServiceBus != capacity.Premium ||
		p.Inputs.MessagingUnit != 1 || len(p.Inputs.Subscribers) != 0 || p.First.Name == "" || len(p.Figures) == 0 {
		t.Errorf("plan = %+v", p)
	}
}

// TestPlan_ReportsEveryMistake: every bad flag is reported at once, each by
// its name; a mistake on the command line alone is a usage error; -h prints
// the usage.
func TestPlan_ReportsEveryMistake(t *testing.T) {
	_, _, err := runPlanCmd(t, map[string]string{"DEPLOY_PROFILE": "staging"}, "-rate", "0", "-duplicates", "2", "-format", "xml",
		"-concurrency", "0", "-servicebus", "premium", "-messaging-units", "3", "-subscribers", "loyalty,loyalty")
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{"DEPLOY_PROFILE (-profile)", "-rate", "-duplicates", "-format", "-concurrency", "-messaging-units", "named twice"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %s:\n%v", want, err)
		}
	}
	var ue *cli.UsageError
	if _, _, err := runPlanCmd(t, nil, "-no-such-flag"); !errors.As(err, &ue) {
		t.Errorf("unknown flag: %v, want a usage error", err)
	}
	if _, _, err := runPlanCmd(t, nil, "extra"); !errors.As(err, &ue) {
		t.Errorf("stray argument: %v, want a usage error", err)
	}
	_, usage, err := runPlanCmd(t, nil, "-h")
	if err != nil || !strings.Contains(usage, "Usage: orderctl plan") || !strings.Contains(usage, "-duplicates") {
		t.Errorf("-h: %v\n%s", err, usage)
	}
}

package infra_test

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/idempotent-consumer/sbcosmos/infra"
)

// This file keeps infra/README.md and the operator's recipes in line with
// azure.yaml and the templates, and checks the small readers the rules use.

// numberWords spells the counts the README writes out.
var numberWords = map[string]int{"four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9}

// services returns the azd services azure.yaml declares, in order.
func services(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("../azure.yaml")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "\nservices:\n")
	if !ok {
		t.Fatal("azure.yaml has no services")
	}
	var out []string
	for _, m := range regexp.MustCompile(`(?m)^  (\w+):$`).FindAllStringSubmatch(rest, -1) {
		out = append(out, m[1])
	}
	return out
}

func readme(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(strings.Fields(string(b)), " ")
}

// TestReadmeCountsTheServices requires every count of services, builds and
// compiles the README states, and its list of azd-service-name tags, to
// match azure.yaml.
func TestReadmeCountsTheServices(t *testing.T) {
	svcs := services(t)
	text := readme(t)
	for _, m := range regexp.MustCompile(`(?i)\b(four|five|six|seven|eight|nine) (services|full compiles|remote compiles)\b`).FindAllStringSubmatch(text, -1) {
		if n := numberWords[strings.ToLower(m[1])]; n != len(svcs) {
			t.Errorf("README says %q; azure.yaml has %d services (%v)", m[0], len(svcs), svcs)
		}
	}
	m := regexp.MustCompile("tagged `azd-service-name` \\(([^)]*)\\)").FindStringSubmatch(text)
	if m == nil {
		t.Fatal("README does not list the azd-service-name tags")
	}
	var tags []string
	for _, q := range regexp.MustCompile("`(\\w+)`").FindAllStringSubmatch(m[1], -1) {
		tags = append(tags, q[1])
	}
	if strings.Join(tags, " ") != strings.Join(svcs, " ") {
		t.Errorf("README lists the azd-service-name tags %v; azure.yaml's services are %v", tags, svcs)
	}
}

// TestReadmeStatesTheCosmosChain requires the README's paragraph on the
// order of creation to name, in the templates' order, every identity whose
// Cosmos DB role assignment the chain orders.
func TestReadmeStatesTheCosmosChain(t *testing.T) {
	text := readme(t)
	_, para, ok := strings.Cut(text, "Order of creation:")
	if !ok {
		t.Fatal("README has no \"Order of creation:\" paragraph")
	}
	para, _, _ = strings.Cut(para, "Images:")
	src, err := os.ReadFile("bicep/modules/cosmos.bicep")
	if err != nil {
		t.Fatal(err)
	}
	var who []string
	for _, m := range regexp.MustCompile(`(?m)^\s+principalId: (\w+)PrincipalId$`).FindAllStringSubmatch(string(src), -1) {
		name := map[string]string{"operator": "orderctl"}[m[1]]
		if name == "" {
			name = m[1]
		}
		if len(who) == 0 || who[len(who)-1] != name {
			who = append(who, name)
		}
	}
	pos := 0
	for _, w := range who {
		i := strings.Index(para[pos:], w)
		if i < 0 {
			t.Fatalf("README's order of creation does not name %s after position %d; the chain is %v: %q", w, pos, who, para)
		}
		pos += i + len(w)
	}
	for _, w := range []string{"database", "container", "role definitions"} {
		if !strings.Contains(para, w) {
			t.Errorf("README's order of creation does not name the %s", w)
		}
	}
}

// TestReadmeStatesTheOneLogPath requires infra/README.md and
// docs/operating.md to say that the deployment turns the OpenTelemetry log
// bridge off and that the logs are in ContainerAppConsoleLogs only.
func TestReadmeStatesTheOneLogPath(t *testing.T) {
	ops, err := os.ReadFile("../docs/operating.md")
	if err != nil {
		t.Fatal(err)
	}
	for name, text := range map[string]string{"infra/README.md": readme(t), "docs/operating.md": strings.Join(strings.Fields(string(ops)), " ")} {
		if !strings.Contains(text, "OTEL_LOGS_EXPORTER=none") {
			t.Errorf("%s does not say the deployment sets OTEL_LOGS_EXPORTER=none", name)
		}
		if m := regexp.MustCompile(`(?i)(traces and (OpenTelemetry )?logs reach Application Insights|sending traces and logs to Application Insights|export traces and logs only)`).FindString(text); m != "" {
			t.Errorf("%s says %q; the deployment sends no OpenTelemetry logs", name, m)
		}
	}
}

// TestOrderctlRecipeLeavesOnlyPeekingArgs requires the orderctl job recipe
// in docs/operating.md to set the peeking args back in the same command
// line that starts a run with other args, so no destructive command line
// (resubmit, purge) stays in the job's template for a later start to repeat.
func TestOrderctlRecipeLeavesOnlyPeekingArgs(t *testing.T) {
	b, err := os.ReadFile("../docs/operating.md")
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.Contains(line, "az containerapp job update") || !strings.Contains(line, "--args") {
			continue
		}
		found = true
		if strings.Contains(line, "resubmit") || strings.Contains(line, "purge") {
			if !regexp.MustCompile(`az containerapp job start [^;&|]*;\s*az containerapp job update [^;&|]*--args dlq list`).MatchString(line) {
				t.Errorf("docs/operating.md: %q sets destructive args without setting `dlq list` back on the same line, after the start", line)
			}
		}
	}
	if !found {
		t.Error("docs/operating.md has no orderctl job recipe (az containerapp job update --args)")
	}
}

// TestPrivateDNSZonesAreGlobal requires every private DNS zone and its
// virtual network links to have location 'global', the only one they take.
func TestPrivateDNSZonesAreGlobal(t *testing.T) {
	r := loadRepo(t)
	if err := checkDNSZonesGlobal(r); err != nil {
		t.Error(err)
	}
	for _, m := range []mutation{
		{bicepDir + "modules/network.bicep", "  name: e.zone\n  location: 'global'\n", "  name: e.zone\n  location: location\n"},
		{bicepDir + "modules/network.bicep", "  name: '${name}-link'\n  location: 'global'\n", "  name: '${name}-link'\n  location: 'westeurope'\n"},
	} {
		if err := checkDNSZonesGlobal(mutate(t, r, m)); err == nil {
			t.Errorf("rule passed after replacing %q with %q", m.old, m.new)
		}
	}
}

func checkDNSZonesGlobal(r repo) error {
	b, err := parse(r)
	if err != nil {
		return err
	}
	for _, typ := range []string{"Microsoft.Network/privateDnsZones", "Microsoft.Network/privateDnsZones/virtualNetworkLinks"} {
		ds, err := b.created(typ)
		if err != nil {
			return err
		}
		for _, d := range ds {
			if err := want(d, "location", "'global'"); err != nil {
				return fmt.Errorf("%w: private DNS zones and their links are global resources", err)
			}
		}
	}
	return nil
}

// TestCheckQueryCatches proves the column check fails on a misspelled
// column, a column of the other table and a name used before it is
// defined, and passes the query forms the alerts use.
func TestCheckQueryCatches(t *testing.T) {
	for _, tt := range []struct {
		query string
		ok    bool
	}{
		{`ContainerAppSystemLogs | where Reason == "ProbeFailed" and Log has "liveness" | summarize n = count() by ContainerAppName`, true},
		{`ContainerAppConsoleLogs | extend e = parse_json(Log) | where tostring(e.msg) == "x" | extend reason = tostring(e.reason) | summarize n = count() by reason, ContainerAppName`, true},
		{`ContainerAppConsoleLogs | where TimeGenerated > ago(26h) | summarize lines = count() | where now() > datetime(2026-12-01T00:00:00Z) + 26h`, true},
		{`ContainerAppSystemLogs | where Reasons == "ProbeFailed" | summarize n = count()`, false},
		{`ContainerAppConsoleLogs | where Reason == "ProbeFailed" | summarize n = count()`, false},
		{`ContainerAppConsoleLogs | where reason == "x" | extend reason = tostring(Log)`, false},
		{`ContainerAppConsoleLogs | summarize n = count() by ContainerAppName | where Log has "x"`, false},
		{`AppTraces | summarize n = count()`, false},
	} {
		_, err := infra.CheckQuery(tt.query)
		if (err == nil) != tt.ok {
			t.Errorf("CheckQuery(%q) = %v, want ok %v", tt.query, err, tt.ok)
		}
	}
}

func ExampleCheckQuery() {
	q := `ContainerAppSystemLogs | where Reasons == "ProbeFailed" | summarize restarts = count() by ContainerAppName`
	if _, err := infra.CheckQuery(q); err != nil {
		fmt.Println("refused: a column the table does not have")
	}
	names, err := infra.CheckQuery(`ContainerAppSystemLogs | where Reason == "ProbeFailed" | summarize restarts = count() by ContainerAppName`)
	fmt.Println(names.Table, names.Defined, names.By, err)
	// Output:
	// refused: a column the table does not have
	// ContainerAppSystemLogs [restarts] [ContainerAppName] <nil>
}

package infra_test

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/idempotent-consumer/sbcosmos/infra"
)

// The typed check: every resource body in infra/bicep against the Bicep
// compiler's own type data (bicep-types-az types.json), which lives outside
// the repository in ../shared/bicep-types (beside the clone; see
// infra/README.md). BICEP_TYPES_DIR overrides the location.

// typeDataDir returns the type data directory. It fails when
// BICEP_TYPES_DIR names a directory that does not exist, and when the
// default one is absent under CI (.ci/run also asserts it is present), so CI
// never skips the check; a user's clone without it skips, saying why.
func typeDataDir(t *testing.T) string {
	t.Helper()
	if dir := os.Getenv("BICEP_TYPES_DIR"); dir != "" {
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			t.Fatalf("BICEP_TYPES_DIR=%s is not a directory (%v)", dir, err)
		}
		return dir
	}
	// Tests run in infra/; the repository root is "..", and the type data
	// is in ../shared/bicep-types beside it.
	dir := filepath.Join("..", "..", "shared", "bicep-types")
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		abs, _ := filepath.Abs(dir)
		if os.Getenv("CI") != "" {
			t.Fatalf("the Bicep type data is missing at %s (%v): CI must provide ../shared/bicep-types beside the clone", abs, err)
		}
		t.Skipf("SKIP: no Bicep type data at %s: put bicep-types-az's generated/ tree there (or set BICEP_TYPES_DIR) to type-check infra/bicep", abs)
	}
	return dir
}

func openTypeData(t *testing.T) *infra.TypeData {
	t.Helper()
	td, err := infra.OpenTypeData(typeDataDir(t))
	if err != nil {
		t.Fatal(err)
	}
	return td
}

// TestResourcesMatchTypeData type-checks every resource declared in
// infra/bicep against the type data for its exact type and API version.
func TestResourcesMatchTypeData(t *testing.T) {
	td := openTypeData(t)
	files, err := infra.ReadDir("bicep")
	if err != nil {
		t.Fatal(err)
	}
	diags, checked, err := td.Check(files)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range diags {
		t.Error(d)
	}
	// Every `resource` statement was checked: count them independently of
	// the reader, so a declaration it skipped cannot go unnoticed.
	want := 0
	for _, f := range files {
		want += len(regexp.MustCompile(`(?m)^resource\s`).FindAllString(f.Text, -1))
	}
	if checked != want || want == 0 {
		t.Errorf("checked %d resource declarations, the templates have %d", checked, want)
	}
}

// TestTypeCheckCatches proves the typed check fails on each kind of fault:
// each case changes one line of a real template and must produce exactly
// the one diagnostic named, at the path named.
func TestTypeCheckCatches(t *testing.T) {
	td := openTypeData(t)
	tests := []struct {
		name           string
		file, old, new string
		code, path     string
	}{
		{"misspelled property", "modules/servicebus.bicep",
			"    requiresDuplicateDetection: true\n    duplicateDetectionHistoryTimeWindow: duplicateDetectionWindow\n    lockDuration", "    requireDuplicateDetection: true\n    duplicateDetectionHistoryTimeWindow: duplicateDetectionWindow\n    lockDuration",
			infra.CodeUnknownProperty, "properties.requireDuplicateDetection"},
		{"wrong letter case", "modules/cosmos.bicep",
			"    disableLocalAuth: true\n", "    DisableLocalAuth: true\n",
			infra.CodeUnknownProperty, "properties.DisableLocalAuth"},
		{"read-only property set", "modules/servicebus.bicep",
			"    disableLocalAuth: true\n", "    disableLocalAuth: true\n    serviceBusEndpoint: 'https://x.servicebus.windows.net:443/'\n",
			infra.CodeReadOnly, "properties.serviceBusEndpoint"},
		{"read-only location on a child resource", "modules/servicebus.bicep",
			"  name: queueName\n", "  name: queueName\n  location: location\n",
			infra.CodeReadOnly, "location"},
		{"string for a bool", "modules/cosmos.bicep",
			"    disableKeyBasedMetadataWriteAccess: true\n", "    disableKeyBasedMetadataWriteAccess: 'true'\n",
			infra.CodeWrongType, "properties.disableKeyBasedMetadataWriteAccess"},
		{"string for an int", "modules/containerapps.bicep",
			"      replicaTimeout: 1800\n", "      replicaTimeout: '1800'\n",
			infra.CodeWrongType, "properties.configuration.replicaTimeout"},
		{"int outside its range", "modules/cosmos.bicep",
			"\n        version: 2\n", "\n        version: 3\n",
			infra.CodeWrongType, "properties.resource.partitionKey.version"},
		{"value outside a closed enum", "modules/cosmos.bicep",
			"    databaseAccountOfferType: 'Standard'\n", "    databaseAccountOfferType: 'Serverless'\n",
			infra.CodeWrongType, "properties.databaseAccountOfferType"},
		{"object for a string", "modules/containerapps.bicep",
			"      destination: 'azure-monitor'\n", "      destination: {\n        type: 'azure-monitor'\n      }\n",
			infra.CodeWrongType, "properties.appLogsConfiguration.destination"},
		{"misspelled property inside an array item", "modules/containerapps.bicep",
			"        categoryGroup: 'allLogs'\n", "        categoryGroups: 'allLogs'\n",
			infra.CodeUnknownProperty, "properties.logs[0].categoryGroups"},
		{"misspelled property inside a loop body", "modules/registry.bicep",
			"    principalType: 'ServicePrincipal'\n", "    principalKind: 'ServicePrincipal'\n",
			infra.CodeUnknownProperty, "properties.principalKind"},
		{"missing required property", "modules/servicebus.bicep",
			"resource namespace 'Microsoft.ServiceBus/namespaces@2024-01-01' = {\n  name: name\n  location: location\n", "resource namespace 'Microsoft.ServiceBus/namespaces@2024-01-01' = {\n  name: name\n",
			infra.CodeMissingRequired, "location"},
		{"missing required nested property", "modules/containerapps.bicep",
			"      triggerType: 'Manual'\n      replicaTimeout: 1800\n", "      replicaTimeout: 1800\n",
			infra.CodeMissingRequired, "properties.configuration.triggerType"},
		{"unknown API version", "modules/servicebus.bicep",
			"'Microsoft.ServiceBus/namespaces/queues@2024-01-01'", "'Microsoft.ServiceBus/namespaces/queues@2024-02-30'",
			infra.CodeUnknownType, ""},
		{"unknown resource type", "modules/monitoring.bicep",
			"'Microsoft.OperationalInsights/workspaces@2023-09-01'", "'Microsoft.OperationalInsights/workspace@2023-09-01'",
			infra.CodeUnknownType, ""},
		{"unknown discriminator", "modules/cosmos.bicep",
			"      type: 'Continuous'\n", "      type: 'Weekly'\n",
			infra.CodeWrongType, "properties.backupPolicy.type"},
		{"discriminator missing", "modules/cosmos.bicep",
			"      type: 'Continuous'\n      continuousModeProperties", "      continuousModeProperties",
			infra.CodeNoDiscriminator, "properties.backupPolicy.type"},
		{"property of another variant", "modules/cosmos.bicep",
			"      continuousModeProperties: {\n        tier: 'Continuous7Days'\n      }\n", "      periodicModeProperties: {}\n",
			infra.CodeUnknownProperty, "properties.backupPolicy.periodicModeProperties"},
		{"property set on an existing reference", "modules/containerapps.bicep",
			"resource workspace 'Microsoft.OperationalInsights/workspaces@2023-09-01' existing = {\n  name: logAnalyticsWorkspaceName\n", "resource workspace 'Microsoft.OperationalInsights/workspaces@2023-09-01' existing = {\n  name: logAnalyticsWorkspaceName\n  location: 'westeurope'\n",
			infra.CodeUnknownProperty, "location"},
		{"identity lifecycle of the wrong type", "modules/containerapps.bicep",
			"The worker identity keeps the default (All).\n      identitySettings: [\n        {\n          identity: scalerIdentityId\n          lifecycle: 'None'\n", "The worker identity keeps the default (All).\n      identitySettings: [\n        {\n          identity: scalerIdentityId\n          lifecycle: false\n",
			infra.CodeWrongType, "properties.configuration.identitySettings[0].lifecycle"},
		// Open enums: the type data takes any string, Azure does not.
		{"open enum: timeAggregation 'Max'", "modules/alerts.bicep",
			"          timeAggregation: 'Maximum'\n", "          timeAggregation: 'Max'\n",
			infra.CodeWrongType, "properties.criteria.allOf[0].timeAggregation"},
		{"open enum: indexingMode 'consistant'", "modules/cosmos.bicep",
			"        indexingMode: 'consistent'\n", "        indexingMode: 'consistant'\n",
			infra.CodeWrongType, "properties.resource.indexingPolicy.indexingMode"},
		{"open enum: identity.type 'UserAssignedd'", "modules/containerapps.bicep",
			"  identity: {\n    type: 'UserAssigned'\n    userAssignedIdentities: {\n      '${producerIdentityId}': {}", "  identity: {\n    type: 'UserAssignedd'\n    userAssignedIdentities: {\n      '${producerIdentityId}': {}",
			infra.CodeWrongType, "identity.type"},
		{"listed open string: logAnalyticsDestinationType 'Dedicate'", "modules/cosmos.bicep",
			"    logAnalyticsDestinationType: 'Dedicated'\n", "    logAnalyticsDestinationType: 'Dedicate'\n",
			infra.CodeWrongType, "properties.logAnalyticsDestinationType"},
		{"listed open string under a named notification: contactRoles 'Owners'", "modules/budget.bicep",
			"          'Owner'\n        ]\n      }\n      forecast100", "          'Owners'\n        ]\n      }\n      forecast100",
			infra.CodeWrongType, "properties.notifications.actual80.contactRoles[0]"},
		// Durations: the type data takes any string, Azure an ISO 8601 duration.
		{"duration without a unit: windowSize 'PT15'", "modules/alerts.bicep",
			"    windowSize: 'PT15M'\n    autoMitigate: true\n    criteria: {\n      'odata.type': 'Microsoft.Azure.Monitor.SingleResourceMultipleMetricCriteria'\n      allOf: [\n        {\n          criterionType: 'StaticThresholdCriterion'\n          name: 'backlog'", "    windowSize: 'PT15'\n    autoMitigate: true\n    criteria: {\n      'odata.type': 'Microsoft.Azure.Monitor.SingleResourceMultipleMetricCriteria'\n      allOf: [\n        {\n          criterionType: 'StaticThresholdCriterion'\n          name: 'backlog'",
			infra.CodeWrongType, "properties.windowSize"},
		{"duration in Go's notation: a log alert's evaluationFrequency '1h'", "modules/alerts.bicep",
			"    evaluationFrequency: 'PT1H'\n", "    evaluationFrequency: '1h'\n",
			infra.CodeWrongType, "properties.evaluationFrequency"},
		// Values held in vars and parameters.
		{"string for an int through a var used once", "modules/containerapps.bicep",
			"var orderctlImage = bootstrapProducerImage\n", "var orderctlImage = 5\n",
			infra.CodeWrongType, "properties.template.containers[0].image"},
		{"string for an int through a parameter's default", "modules/alerts.bicep",
			"param backlogThreshold int = 1000\n", "param backlogThreshold int = '1000'\n",
			infra.CodeWrongType, "properties.criteria.allOf[0].threshold"},
	}
	files, err := infra.ReadDir("bicep")
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var mutated []infra.File
			found := false
			for _, f := range files {
				if f.Path == tt.file {
					if n := strings.Count(f.Text, tt.old); n != 1 {
						t.Fatalf("%s contains %q %d times, want once: update the case", f.Path, tt.old, n)
					}
					f.Text = strings.Replace(f.Text, tt.old, tt.new, 1)
					found = true
				}
				mutated = append(mutated, f)
			}
			if !found {
				t.Fatalf("no template %s", tt.file)
			}
			diags, _, err := td.Check(mutated)
			if err != nil {
				t.Fatal(err)
			}
			if len(diags) != 1 || diags[0].Code != tt.code || diags[0].Path != tt.path {
				t.Fatalf("diagnostics %v, want exactly one %s at %q", diags, tt.code, tt.path)
			}
			t.Logf("caught: %v", diags[0])
		})
	}
}

// TestTypeCheckSeesThroughSymbols changes a var or parameter that several
// resources use, or one branch of a ternary, and requires every use to be
// reported, each with the code at a path ending as named.
func TestTypeCheckSeesThroughSymbols(t *testing.T) {
	td := openTypeData(t)
	tests := []struct {
		name             string
		file, old, new   string
		code, pathSuffix string
		uses             int
	}{
		{"string for an int through a var", "modules/containerapps.bicep",
			"var terminationGracePeriodSeconds = 60\n", "var terminationGracePeriodSeconds = '60'\n",
			infra.CodeWrongType, "properties.template.terminationGracePeriodSeconds", 4},
		{"string for an int through a var inside a var (the probes)", "modules/containerapps.bicep",
			"var healthPort = 8080\n", "var healthPort = '8080'\n",
			infra.CodeWrongType, ".httpGet.port", 12}, // 3 probes in each of the worker, the relay and the 2 subscribers
		{"one branch of a ternary", "modules/alerts.bicep",
			"    actionGroupId: actionGroup.id\n", "    actionGroupID: actionGroup.id\n",
			infra.CodeUnknownProperty, "properties.actions[0].actionGroupID", 3},
		{"a parameter's default", "modules/containerapps.bicep",
			"param subscriberMaxReplicas int = 5\n", "param subscriberMaxReplicas int = '5'\n",
			infra.CodeWrongType, "properties.template.scale.maxReplicas", 2},
	}
	files, err := infra.ReadDir("bicep")
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var mutated []infra.File
			for _, f := range files {
				if f.Path == tt.file {
					if n := strings.Count(f.Text, tt.old); n != 1 {
						t.Fatalf("%s contains %q %d times, want once: update the case", f.Path, tt.old, n)
					}
					f.Text = strings.Replace(f.Text, tt.old, tt.new, 1)
				}
				mutated = append(mutated, f)
			}
			diags, _, err := td.Check(mutated)
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range diags {
				if d.Code != tt.code || !strings.HasSuffix(d.Path, tt.pathSuffix) {
					t.Errorf("unexpected %v", d)
				}
			}
			if len(diags) != tt.uses {
				t.Errorf("%d diagnostics %v, want one per use: %d", len(diags), diags, tt.uses)
			}
		})
	}
}

// TestTypeCheckValues covers the value forms the templates do not use yet.
func TestTypeCheckValues(t *testing.T) {
	td := openTypeData(t)
	const head = "resource q 'Microsoft.ServiceBus/namespaces/queues@2024-01-01' = {\n  name: 'q'\n  properties: {\n"
	tests := []struct {
		name, props string
		want        []string // "code path"
	}{
		{"parameter for a bool is not checked", "    requiresSession: x\n", nil},
		{"ternary for an int: both branches checked", "    maxDeliveryCount: a ? 1 : 2\n", nil},
		{"ternary with a wrong branch", "    maxDeliveryCount: a ? 1 : 'two'\n", []string{"BCP036 properties.maxDeliveryCount"}},
		{"nested ternary", "    maxDeliveryCount: a ? 1 : b ? true : 2\n", []string{"BCP036 properties.maxDeliveryCount"}},
		{"coalesce is not a ternary", "    maxDeliveryCount: a ?? 2\n", nil},
		{"interpolated string for a duration", "    lockDuration: 'PT${n}S'\n", nil},
		{"interpolated string for a bool", "    requiresSession: '${x}'\n", []string{"BCP036 properties.requiresSession"}},
		{"null is not checked", "    forwardTo: null\n", nil},
		{"int for a string", "    forwardTo: 5\n", []string{"BCP036 properties.forwardTo"}},
		{"array for a bool", "    requiresSession: [\n      true\n    ]\n", []string{"BCP036 properties.requiresSession"}},
		{"two faults, both reported", "    requiresSesion: true\n    maxDeliveryCount: true\n", []string{"BCP037 properties.requiresSesion", "BCP036 properties.maxDeliveryCount"}},
		{"property set twice", "    requiresSession: true\n    requiresSession: false\n", []string{"BCP025 properties.requiresSession"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := infra.File{Path: "t.bicep", Text: head + tt.props + "  }\n}\n"}
			diags, checked, err := td.Check([]infra.File{f})
			if err != nil {
				t.Fatal(err)
			}
			if checked != 1 {
				t.Fatalf("checked %d resources, want 1", checked)
			}
			var got []string
			for _, d := range diags {
				got = append(got, d.Code+" "+d.Path)
			}
			if strings.Join(got, "; ") != strings.Join(tt.want, "; ") {
				t.Errorf("diagnostics %v, want %v", diags, tt.want)
			}
		})
	}
}

// TestTypeDataDecodes reads every types.json present, so a file the check
// does not use yet cannot hide a format it does not understand.
func TestTypeDataDecodes(t *testing.T) {
	dir := typeDataDir(t)
	n := 0
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() != "types.json" {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		parts := strings.Split(filepath.ToSlash(rel), "/")
		if len(parts) != 3 {
			return errors.New("unexpected layout: " + rel)
		}
		n++
		td, err := infra.OpenTypeData(dir)
		if err != nil {
			return err
		}
		// A resource of a provider-less type name forces the file to load
		// without matching anything.
		_, err = td.CheckResource("t.bicep", infra.Decl{Kind: infra.Resource, Name: "x", Type: parts[0] + "/none", APIVersion: parts[1], Body: "{\n}"})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Fatalf("no types.json under %s", dir)
	}
}

func TestOpenTypeDataMissing(t *testing.T) {
	if _, err := infra.OpenTypeData(filepath.Join(t.TempDir(), "absent")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("OpenTypeData(absent) error = %v, want fs.ErrNotExist", err)
	}
}

func ExampleTypeData_CheckResource() {
	td, err := infra.OpenTypeData(os.Getenv("BICEP_TYPES_DIR"))
	if err != nil {
		fmt.Println("no type data:", err)
		return
	}
	f := infra.File{Path: "q.bicep", Text: "resource q 'Microsoft.ServiceBus/namespaces/queues@2024-01-01' = {\n  name: 'orders'\n  properties: {\n    requiresDuplicateDetection: 'yes'\n    lockDurations: 'PT1M'\n  }\n}\n"}
	diags, _, err := td.Check([]infra.File{f})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, d := range diags {
		fmt.Println(d.Code, d.Path)
	}
}

// TestOpenEnumsHaveSources requires every entry of the open-enum table to
// name its values and where they are documented.
func TestOpenEnumsHaveSources(t *testing.T) {
	for key, e := range infra.OpenEnums {
		if len(e.Values) == 0 || !strings.Contains(e.Source, "https://") || key != strings.ToLower(key[:strings.Index(key, " ")])+key[strings.Index(key, " "):] {
			t.Errorf("OpenEnums[%q] = %+v: want values, a source with its address, and a lower-case resource type", key, e)
		}
	}
}

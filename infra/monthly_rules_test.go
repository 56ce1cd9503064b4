package infra_test

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/idempotent-consumer/sbcosmos/infra"
)

// This file holds the rules that keep `azd up` working the first time and
// every month after, in both profiles, with least privilege and one log path:
// the relay's probes on the bootstrap image, the budget's fixed first month
// and its recipient, log alerts created before their tables have rows, alert
// windows that outlast ingestion, the worker's Cosmos DB role, the production
// network and replicas, the Go runtime's memory settings and the exporters
// each container runs. TestRules and TestRulesCatch run them with the others.

// The hook scripts that azure.yaml runs before every provisioning.
const (
	hookSh  = "infra/hooks/preprovision.sh"
	hookPs1 = "infra/hooks/preprovision.ps1"
)

// ingestionAllowance is how much longer than its evaluation frequency a log
// alert's window must be, so that a line ingested late is still in a later
// window: Microsoft documents an average ingestion latency of 20 s to 3 min
// for Azure Monitor Logs (earlier, 2 to 5 min), with outliers beyond it
// ("Log data ingestion time in Azure Monitor"). Ten minutes is twice the
// larger figure.
const ingestionAllowance = 10 * time.Minute

// corroboratedReasons are the values of ContainerAppSystemLogs' Reason column
// that a public source shows Container Apps writing, with the source. The
// restart alert may name no other: Microsoft documents the column, not its
// values.
var corroboratedReasons = map[string]string{
	"ProbeFailed":         "yeongseon/azure-container-apps-practical-guide, labs/probe-and-port-mismatch: live system log stream, \"Msg\":\"Probe of StartUp failed with status code: 1\",\"Reason\":\"ProbeFailed\"",
	"PodUnhealthy":        "microsoft/azure-container-apps #723: \"Readiness probe failed: ...\", \"Reason\":\"PodUnhealthy\" (an earlier reason for a failed probe)",
	"PodUnhealhy":         "microsoft/azure-container-apps #399: \"Startup probe failed: ...\" with the reason PodUnhealhy, so spelled",
	"ContainerTerminated": "microsoft/azure-container-apps #1163 (reason ContainerTerminated) and #1085 (Log \"Container '...' was terminated with exit code '137'\")",
}

// goMemoryFraction is the share of a container's memory GOMEMLIMIT is set to
// (issue 34: about 90 %), with the tolerance a whole number of MiB needs.
const (
	goMemoryFraction  = 0.90
	goMemoryTolerance = 0.01
	goGC              = "'400'"
)

var monthlyRules = []rule{
	{
		name:  "the budget keeps the month of the environment's first provisioning, which a preprovision hook records once",
		check: checkBudgetStart,
		mutations: []mutation{
			// Back to the month of each provisioning.
			{mainFile, "var firstProvision = empty(firstProvisionTime) ? deploymentTime : firstProvisionTime\n", "var firstProvision = deploymentTime\n"},
			// The hook overwrites the value every time.
			{hookSh, "if [ -z \"${FIRST_PROVISION_TIME:-}\" ]; then", "if true; then"},
			{hookPs1, "if (-not $env:FIRST_PROVISION_TIME) {", "if ($true) {"},
			// The parameter is not read from the azd environment.
			{bicepDir + "main.parameters.json", `"${FIRST_PROVISION_TIME=}"`, `""`},
			// Windows users get no hook.
			{"azure.yaml", "    windows:\n      shell: pwsh\n      run: ./infra/hooks/preprovision.ps1\n", ""},
		},
	},
	{
		name:  "the budget notifies the alerts' action group, and production cannot be provisioned without an address for it",
		check: checkBudgetRecipient,
		mutations: []mutation{
			{bicepDir + "modules/budget.bicep", "        contactGroups: [\n          actionGroupId\n        ]\n        contactRoles: [\n          'Owner'\n        ]\n      }\n    }\n  }\n}", "        contactRoles: [\n          'Owner'\n        ]\n      }\n    }\n  }\n}"},
			{mainFile, "    actionGroupId: alerts.outputs.actionGroupId\n", "    actionGroupId: ''\n"},
			{hookSh, `[ "${DEPLOY_PROFILE:-dev}" = production ] && [ -z "${ALERT_EMAIL:-}" ]`, `false`},
			{hookPs1, `($env:DEPLOY_PROFILE -eq 'production') -and -not $env:ALERT_EMAIL`, `$false`},
		},
	},
	{
		name:  "every log alert skips query validation (its table may have no rows yet), and its query reads documented columns only",
		check: bicepRule(checkLogAlertQueries),
		mutations: []mutation{
			{bicepDir + "modules/alerts.bicep", "    displayName: 'orders-mismatch'\n", "    displayName: 'orders-mismatch'\n    skipQueryValidation: false\n"},
			// A typo in a column.
			{bicepDir + "modules/alerts.bicep", `where JobName startswith "${auditJobName}"`, `where JobNames startswith "${auditJobName}"`},
			// The measure is not a column the query produces.
			{bicepDir + "modules/alerts.bicep", "          metricMeasureColumn: 'failed'\n", "          metricMeasureColumn: 'failures'\n"},
		},
	},
	{
		name:  "every log alert's window outlasts its frequency by the ingestion latency, and the restart alert names only reasons a source shows",
		check: bicepRule(checkLogAlertWindows),
		mutations: []mutation{
			{bicepDir + "modules/alerts.bicep", "    evaluationFrequency: 'PT5M'\n    windowSize: 'PT15M'\n    criteria: {\n      allOf: [\n        {\n          query: deadLetterQuery", "    evaluationFrequency: 'PT5M'\n    windowSize: 'PT5M'\n    criteria: {\n      allOf: [\n        {\n          query: deadLetterQuery"},
			{bicepDir + "modules/alerts.bicep", `"PodUnhealhy")`, `"PodUnhealhy", "OOMKilled")`},
		},
	},
	{
		name:  "the audit-missing alert waits a full silence period after the environment's first provisioning",
		check: bicepRule(checkAuditGrace),
		mutations: []mutation{
			{bicepDir + "modules/alerts.bicep", " | where now() > datetime(${firstProvisionTime}) + ${auditMaxSilenceHours}h'", "'"},
			{mainFile, "    firstProvisionTime: firstProvision\n", "    firstProvisionTime: deploymentTime\n"},
		},
	},
	{
		name:  "production subnets have network security groups, the relay runs a replica per zone, and the Cosmos DB account writes in one region",
		check: bicepRule(checkProductionShape),
		mutations: []mutation{
			{bicepDir + "modules/network.bicep", "          privateEndpointNetworkPolicies: 'Disabled'\n          networkSecurityGroup: {\n            id: endpointsNsg.id\n          }\n", "          privateEndpointNetworkPolicies: 'Disabled'\n"},
			{bicepDir + "modules/containerapps.bicep", "var relayReplicas = empty(infrastructureSubnetId) ? 1 : 3\n", "var relayReplicas = 1\n"},
			{bicepDir + "modules/cosmos.bicep", "    enableMultipleWriteLocations: false\n", "    enableMultipleWriteLocations: true\n"},
			{bicepDir + "modules/cosmos.bicep", "    enableMultipleWriteLocations: false\n", ""},
		},
	},
	{
		name:  "every app and job exports no OpenTelemetry logs (stderr is the one log path), and the agent takes no logs",
		check: bicepRule(checkOneLogPath),
		mutations: []mutation{
			{bicepDir + "modules/containerapps.bicep", "var otlpLogsExporter = 'none'\n", "var otlpLogsExporter = 'otlp'\n"},
			{bicepDir + "modules/containerapps.bicep", "      tracesConfiguration: {\n", "      logsConfiguration: {\n        destinations: [\n          'appInsights'\n        ]\n      }\n      tracesConfiguration: {\n"},
		},
	},
	{
		name:  "every Go container runs with GOGC=400 and GOMEMLIMIT at 90 % of its memory",
		check: bicepRule(checkGoMemory),
		mutations: []mutation{
			{bicepDir + "modules/containerapps.bicep", "var smallGoMemLimit = '460MiB' // 90 % of 512 MiB\n", "var smallGoMemLimit = '512MiB' // 90 % of 512 MiB\n"},
			{bicepDir + "modules/containerapps.bicep", "var goGC = '400'\n", "var goGC = '100'\n"},
			// The worker's memory grows without its limit.
			{bicepDir + "modules/containerapps.bicep", "var workerMemory = '1Gi'\n", "var workerMemory = '2Gi'\n"},
		},
	},
}

// checkBudgetStart requires the budget's start date to come from the
// environment's first provisioning: main.bicep reads FIRST_PROVISION_TIME
// (falling back to the deployment's time only when it is empty, on the very
// provisioning whose hook wrote it), and a preprovision hook for each shell
// writes it only when it is unset.
func checkBudgetStart(r repo) error {
	b, err := parse(r)
	if err != nil {
		return err
	}
	p, ok := b.find(mainFile, infra.Param, "firstProvisionTime")
	if !ok || p.Value != "''" {
		return fmt.Errorf("main.bicep: want param firstProvisionTime string = '' (FIRST_PROVISION_TIME), got %q", p.Value)
	}
	if v, ok := b.find(mainFile, infra.Var, "firstProvision"); !ok || v.Value != "empty(firstProvisionTime) ? deploymentTime : firstProvisionTime" {
		return fmt.Errorf("main.bicep: var firstProvision = %q, want empty(firstProvisionTime) ? deploymentTime : firstProvisionTime", v.Value)
	}
	start, err := b.moduleParam("modules/budget.bicep", "startDate")
	if err != nil {
		return err
	}
	if start != "'${substring(firstProvision, 0, 7)}-01'" {
		return fmt.Errorf("main.bicep passes startDate = %s to the budget, want the first of the month of firstProvision: the budgets API refuses a changed start date", start)
	}
	for _, d := range b.all(infra.Param, "") {
		if strings.Contains(d.Value, "utcNow(") && d.Name != "deploymentTime" {
			return fmt.Errorf("%v defaults to utcNow(): a value that moves with every provisioning", d)
		}
	}
	params, err := parametersFile(r[bicepDir+"main.parameters.json"])
	if err != nil {
		return err
	}
	if params["firstProvisionTime"] != "${FIRST_PROVISION_TIME=}" {
		return fmt.Errorf("main.parameters.json: firstProvisionTime = %v, want ${FIRST_PROVISION_TIME=}", params["firstProvisionTime"])
	}
	y := r["azure.yaml"]
	for _, re := range []string{
		`(?m)^hooks:\n  preprovision:\n    posix:\n      shell: sh\n      run: \./infra/hooks/preprovision\.sh\n    windows:\n      shell: pwsh\n      run: \./infra/hooks/preprovision\.ps1\n`,
	} {
		if !regexp.MustCompile(re).MatchString(y) {
			return fmt.Errorf("azure.yaml has no preprovision hook for both shells matching %s", re)
		}
	}
	for file, want := range map[string][]string{
		hookSh:  {"if [ -z \"${FIRST_PROVISION_TIME:-}\" ]; then", "azd env set FIRST_PROVISION_TIME \"$(date -u +%Y-%m-%dT%H:%M:%SZ)\""},
		hookPs1: {"if (-not $env:FIRST_PROVISION_TIME) {", "azd env set FIRST_PROVISION_TIME ([DateTime]::UtcNow.ToString(\"yyyy-MM-dd'T'HH':'mm':'ss'Z'\", [Globalization.CultureInfo]::InvariantCulture))"},
	} {
		for _, w := range want {
			if !strings.Contains(r[file], w) {
				return fmt.Errorf("%s lacks %q: the first provisioning's time must be written once, and only when unset", file, w)
			}
		}
	}
	return nil
}

// checkBudgetRecipient requires every budget notification to go to the
// alerts' action group (a resource-group budget needs a contact e-mail or
// contact group: contactRoles alone is not enough), main.bicep to wire the
// alerts module's action group to it, and both hooks to refuse a production
// provisioning without ALERT_EMAIL, which the action group exists for.
func checkBudgetRecipient(r repo) error {
	b, err := parse(r)
	if err != nil {
		return err
	}
	bs, err := b.created("Microsoft.Consumption/budgets")
	if err != nil {
		return err
	}
	n, err := get(bs[0], "properties.notifications")
	if err != nil {
		return err
	}
	notes, err := infra.ParseObject(n)
	if err != nil {
		return err
	}
	for _, note := range notes {
		g, _ := infra.Lookup(note.Value, "contactGroups")
		if strings.Join(strings.Fields(g), " ") != "[ actionGroupId ]" {
			return fmt.Errorf("%v: notification %s sends to contact groups %q, want [actionGroupId]", bs[0], note.Key, g)
		}
	}
	if v, err := b.moduleParam("modules/budget.bicep", "actionGroupId"); err != nil || v != "alerts.outputs.actionGroupId" {
		return fmt.Errorf("main.bicep passes actionGroupId = %q to the budget (%v), want alerts.outputs.actionGroupId", v, err)
	}
	if o, ok := b.find(bicepDir+"modules/alerts.bicep", infra.Output, "actionGroupId"); !ok || o.Value != "notify ? actionGroup.id : ''" {
		return fmt.Errorf("alerts.bicep: output actionGroupId = %q, want notify ? actionGroup.id : ''", o.Value)
	}
	for file, guard := range map[string]string{
		hookSh:  `[ "${DEPLOY_PROFILE:-dev}" = production ] && [ -z "${ALERT_EMAIL:-}" ]`,
		hookPs1: `($env:DEPLOY_PROFILE -eq 'production') -and -not $env:ALERT_EMAIL`,
	} {
		if !strings.Contains(r[file], guard) {
			return fmt.Errorf("%s does not refuse the production profile without ALERT_EMAIL (%q): its budget would have no action group to notify", file, guard)
		}
	}
	return nil
}

// logAlerts returns every scheduled query rule with its one criterion and
// its query, resolved through a var of its file, with each interpolation
// replaced by 1.
func logAlerts(b *bicep) ([]decl, []decl, []string, error) {
	var rules, crits []decl
	var queries []string
	interp := regexp.MustCompile(`\$\{[^}]*\}`)
	for _, a := range b.all(infra.Resource, "Microsoft.Insights/scheduledQueryRules") {
		allOf, err := get(a, "properties.criteria.allOf")
		if err != nil {
			return nil, nil, nil, err
		}
		cs, err := infra.ParseArray(allOf)
		if err != nil || len(cs) != 1 {
			return nil, nil, nil, fmt.Errorf("%v: want one criterion (%v)", a, err)
		}
		q, _ := infra.Lookup(cs[0], "query")
		if v, ok := b.find(a.file, infra.Var, q); ok {
			q = v.Value
		}
		q = strings.TrimSpace(q)
		if len(q) < 2 || q[0] != '\'' || q[len(q)-1] != '\'' {
			return nil, nil, nil, fmt.Errorf("%v: query %s is not a string", a, q)
		}
		rules = append(rules, a)
		crits = append(crits, decl{a.file, infra.Decl{Kind: a.Kind, Name: a.Name, Line: a.Line, Body: cs[0]}})
		queries = append(queries, interp.ReplaceAllString(q[1:len(q)-1], "1"))
	}
	if len(rules) == 0 {
		return nil, nil, nil, fmt.Errorf("no scheduled query rules")
	}
	return rules, crits, queries, nil
}

func checkLogAlertQueries(b *bicep) error {
	rules, crits, queries, err := logAlerts(b)
	if err != nil {
		return err
	}
	for i, a := range rules {
		// Validation runs the query against the workspace when the rule is
		// created, and fails on a table that has no rows yet; the rules are
		// created with the environment whose logs fill the tables.
		if err := want(a, "properties.skipQueryValidation", "true"); err != nil {
			return err
		}
		names, err := infra.CheckQuery(queries[i])
		if err != nil {
			return fmt.Errorf("%v: %w", a, err)
		}
		m, _ := infra.Lookup(crits[i].Body, "metricMeasureColumn")
		if col, _ := infra.Unquote(m); !contains(names.Defined, col) {
			return fmt.Errorf("%v: metricMeasureColumn %s is not a column the query computes (%v)", a, m, names.Defined)
		}
		if dims, ok := infra.Lookup(crits[i].Body, "dimensions"); ok {
			ds, err := infra.ParseArray(dims)
			if err != nil {
				return err
			}
			for _, d := range ds {
				n, _ := infra.Lookup(d, "name")
				if col, _ := infra.Unquote(n); !contains(names.By, col) {
					return fmt.Errorf("%v: dimension %s is not a column the query groups by (%v)", a, n, names.By)
				}
			}
		}
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func checkLogAlertWindows(b *bicep) error {
	rules, _, queries, err := logAlerts(b)
	if err != nil {
		return err
	}
	dur := func(a decl, path string) (time.Duration, error) {
		v, err := get(a, path)
		if err != nil {
			return 0, err
		}
		s, ok := infra.Unquote(v)
		if !ok {
			return 0, fmt.Errorf("%v: %s = %s is not a literal", a, path, v)
		}
		return infra.ParseDuration(s)
	}
	for i, a := range rules {
		freq, err := dur(a, "properties.evaluationFrequency")
		if err != nil {
			return err
		}
		window, err := dur(a, "properties.windowSize")
		if err != nil {
			return err
		}
		if _, ok := infra.Lookup(a.Body, "properties.overrideQueryTimeRange"); ok {
			if window, err = dur(a, "properties.overrideQueryTimeRange"); err != nil {
				return err
			}
		}
		if window < freq+ingestionAllowance {
			return fmt.Errorf("%v: looks back %v every %v; a line ingested late falls between two windows: look back at least %v more than the frequency", a, window, freq, ingestionAllowance)
		}
		for _, m := range regexp.MustCompile(`Reason\s*==\s*"([^"]*)"|Reason\s+in\s*\(([^)]*)\)`).FindAllStringSubmatch(queries[i], -1) {
			vals := []string{m[1]}
			if m[1] == "" {
				vals = regexp.MustCompile(`"([^"]*)"`).FindAllString(m[2], -1)
			}
			for _, v := range vals {
				v = strings.Trim(v, `"`)
				if _, ok := corroboratedReasons[v]; !ok {
					return fmt.Errorf("%v: the query names Reason %q, which no source found shows Container Apps writing; cite one in corroboratedReasons or drop it", a, v)
				}
			}
		}
	}
	return nil
}

// checkAuditGrace requires the audit-missing alert to stay quiet until a
// whole silence period has passed since the environment's first
// provisioning: before the first scheduled run there is no audit output, and
// that is no fault.
func checkAuditGrace(b *bicep) error {
	_, _, q, err := scheduledQuery(b, "orders-audit-missing")
	if err != nil {
		return err
	}
	if !strings.HasSuffix(q, " | where now() > datetime(${firstProvisionTime}) + ${auditMaxSilenceHours}h") {
		return fmt.Errorf("orders-audit-missing: query %q does not wait auditMaxSilenceHours after the first provisioning (firstProvisionTime)", q)
	}
	if v, err := b.moduleParam("modules/alerts.bicep", "firstProvisionTime"); err != nil || v != "firstProvision" {
		return fmt.Errorf("main.bicep passes firstProvisionTime = %q to the alerts (%v), want firstProvision", v, err)
	}
	return nil
}

func checkProductionShape(b *bicep) error {
	// Every subnet of every virtual network has a network security group of
	// the same template.
	for _, vn := range b.all(infra.Resource, "Microsoft.Network/virtualNetworks") {
		subnets, err := get(vn, "properties.subnets")
		if err != nil {
			return err
		}
		items, err := infra.ParseArray(subnets)
		if err != nil {
			return err
		}
		for _, s := range items {
			name, _ := infra.Lookup(s, "name")
			id, ok := infra.Lookup(s, "properties.networkSecurityGroup.id")
			sym, isID := strings.CutSuffix(id, ".id")
			nsg, found := b.find(vn.file, infra.Resource, sym)
			if !ok || !isID || !found || !strings.EqualFold(nsg.Type, "Microsoft.Network/networkSecurityGroups") {
				return fmt.Errorf("%v: subnet %s has no network security group of the template (%q)", vn, name, id)
			}
		}
	}
	// The relay: one replica in dev; in production, where the environment
	// is zone-redundant, one per zone (Microsoft: zone redundancy "only
	// provides benefits when you have 2 or more replicas, with 3 or more
	// being ideal"). Its leases let several run.
	relay, err := serviceResource(b, "Microsoft.App/containerApps", "relay")
	if err != nil {
		return err
	}
	for prof, min := range map[string]int{"dev": 1, "production": 3} {
		lo, err := profileGet(b, relay, "properties.template.scale.minReplicas", prof)
		if err != nil {
			return err
		}
		hi, err := profileGet(b, relay, "properties.template.scale.maxReplicas", prof)
		if err != nil {
			return err
		}
		n, err := strconv.Atoi(lo)
		if err != nil || n < min || lo != hi {
			return fmt.Errorf("%v: %s profile: relay replicas %s to %s, want %d or more, min = max", relay, prof, lo, hi, min)
		}
		if prof == "dev" && n != 1 {
			return fmt.Errorf("%v: dev profile: %d relay replicas, want 1", relay, n)
		}
	}
	// The pattern's create is the arbiter of "already processed" only within
	// one write region: with several, two regions can each accept the same
	// id. (The issue "No outage drains the backlog" makes Check refuse such
	// an account at runtime.)
	accts, err := b.created("Microsoft.DocumentDB/databaseAccounts")
	if err != nil {
		return err
	}
	for _, a := range accts {
		if err := want(a, "properties.enableMultipleWriteLocations", "false"); err != nil {
			return fmt.Errorf("%w: several write regions would each accept the same id", err)
		}
	}
	return nil
}

// allContainers returns every container app and job the templates create,
// sorted by name.
func allContainers(b *bicep) ([]decl, error) {
	var out []decl
	for _, typ := range []string{"Microsoft.App/containerApps", "Microsoft.App/jobs"} {
		ds, err := b.created(typ)
		if err != nil {
			return nil, err
		}
		out = append(out, ds...)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// envValue resolves an env value expression through the vars of d's file.
func envValue(b *bicep, d decl, expr string) string {
	for i := 0; i < 5; i++ {
		v, ok := b.find(d.file, infra.Var, expr)
		if !ok {
			break
		}
		expr = v.Value
	}
	return expr
}

func checkOneLogPath(b *bicep) error {
	apps, err := allContainers(b)
	if err != nil {
		return err
	}
	for _, app := range apps {
		env, err := containerEnv(app)
		if err != nil {
			return err
		}
		if v := envValue(b, app, env["OTEL_LOGS_EXPORTER"]); v != "'none'" {
			return fmt.Errorf("%v: OTEL_LOGS_EXPORTER = %q, want 'none': stderr to ContainerAppConsoleLogs is the deployment's one log path", app, env["OTEL_LOGS_EXPORTER"])
		}
	}
	envs, err := b.created("Microsoft.App/managedEnvironments")
	if err != nil {
		return err
	}
	for _, e := range envs {
		if _, ok := infra.Lookup(e.Body, "properties.openTelemetryConfiguration.logsConfiguration"); ok {
			return fmt.Errorf("%v: the OpenTelemetry agent forwards logs; every log line would be ingested twice (ContainerAppConsoleLogs and AppTraces)", e)
		}
	}
	return nil
}

var (
	memoryRE   = regexp.MustCompile(`^'([0-9.]+)Gi'$`)
	memLimitRE = regexp.MustCompile(`^'([0-9]+)MiB'$`)
)

func checkGoMemory(b *bicep) error {
	apps, err := allContainers(b)
	if err != nil {
		return err
	}
	for _, app := range apps {
		cs, _ := get(app, "properties.template.containers")
		containers, err := infra.ParseArray(cs)
		if err != nil || len(containers) != 1 {
			return fmt.Errorf("%v: want one container (%v)", app, err)
		}
		mem, _ := infra.Lookup(containers[0], "resources.memory")
		mem = envValue(b, app, mem)
		m := memoryRE.FindStringSubmatch(mem)
		if m == nil {
			return fmt.Errorf("%v: memory %s is not a literal in Gi", app, mem)
		}
		gi, _ := strconv.ParseFloat(m[1], 64)
		env, err := containerEnv(app)
		if err != nil {
			return err
		}
		if v := envValue(b, app, env["GOGC"]); v != goGC {
			return fmt.Errorf("%v: GOGC = %q, want %s", app, v, goGC)
		}
		lim := envValue(b, app, env["GOMEMLIMIT"])
		l := memLimitRE.FindStringSubmatch(lim)
		if l == nil {
			return fmt.Errorf("%v: GOMEMLIMIT = %q, want a whole number of MiB", app, lim)
		}
		mib, _ := strconv.ParseFloat(l[1], 64)
		if f := mib / (gi * 1024); f < goMemoryFraction-goMemoryTolerance || f > goMemoryFraction {
			return fmt.Errorf("%v: GOMEMLIMIT %s is %.1f %% of the container's %s, want %.0f %%", app, lim, f*100, mem, goMemoryFraction*100)
		}
	}
	return nil
}

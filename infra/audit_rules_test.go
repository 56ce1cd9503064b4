package infra_test

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/idempotent-consumer/sbcosmos/infra"
)

// This file holds the rules for the scheduled audit: `orderctl audit` as a
// scheduled Container Apps job with a read-only identity of its own, and the
// two log alerts on its result (a failed execution) and on its absence (no
// audit output for too long). TestRules and TestRulesCatch run them with the
// others; the audit's role grants are in wantGrants, its environment in
// auditEnv.

var auditRules = []rule{
	{
		name: "the audit is a scheduled job that runs orderctl audit once per trigger, without retries, as its own identity",
		check: func(r repo) error {
			b, err := parse(r)
			if err != nil {
				return err
			}
			return checkAuditJob(b, r[bicepDir+"main.parameters.json"])
		},
		mutations: []mutation{
			// Another command in the audit's place.
			{bicepDir + "modules/containerapps.bicep", "          args: [\n            'audit'\n          ]\n", "          args: [\n            'dlq'\n            'list'\n          ]\n"},
			// A retried violation only repeats the alert.
			{bicepDir + "modules/containerapps.bicep", "      replicaTimeout: auditReplicaTimeout\n      replicaRetryLimit: 0\n", "      replicaTimeout: auditReplicaTimeout\n      replicaRetryLimit: 3\n"},
			// Started by hand only: nothing audits.
			{bicepDir + "modules/containerapps.bicep", "      triggerType: 'Schedule'\n", "      triggerType: 'Manual'\n"},
			// A schedule that ignores the parameter.
			{bicepDir + "modules/containerapps.bicep", "        cronExpression: auditSchedule\n", "        cronExpression: '*/5 * * * *'\n"},
			// The audit runs as orderctl's identity, which may purge dead letters.
			{mainFile, "    auditIdentityId: auditIdentity.outputs.id\n", "    auditIdentityId: orderctlIdentity.outputs.id\n"},
			// The shipping subscriber's markers go unchecked.
			{bicepDir + "modules/containerapps.bicep", "value: '${loyaltySubscriptionName}=${cosmosLoyaltyContainerName},${shippingSubscriptionName}=${cosmosShippingContainerName}'", "value: '${loyaltySubscriptionName}=${cosmosLoyaltyContainerName}'"},
			// Not a five-field cron expression.
			{mainFile, "param auditSchedule string = '17 3 * * *'", "param auditSchedule string = '0 17 3 * * *'"},
			// The schedule cannot be set from the azd environment.
			{bicepDir + "main.parameters.json", `"${AUDIT_SCHEDULE=17 3 * * *}"`, `"17 3 * * *"`},
		},
	},
	{
		name:  "a log alert fires on each failed audit execution and notifies the operator once, without resolving itself",
		check: bicepRule(checkAuditFailedAlert),
		mutations: []mutation{
			{bicepDir + "modules/alerts.bicep", `Log has "has exited with status Failed"`, `Log has "has exited with status Succeeded"`},
			// The audit alert watches the orderctl job instead.
			{mainFile, "    auditJobName: apps.outputs.auditName\n", "    auditJobName: apps.outputs.orderctlName\n"},
			{bicepDir + "modules/alerts.bicep", `where JobName startswith "${auditJobName}" and`, `where JobName == "caj-audit" and`},
			// Resolves itself: a violation would clear by time passing.
			{bicepDir + "modules/alerts.bicep", "    autoMitigate: false\n    actions: logAlertActions\n", "    autoMitigate: true\n    actions: logAlertActions\n"},
			// Notifies nobody.
			{bicepDir + "modules/alerts.bicep", "    autoMitigate: false\n    actions: logAlertActions\n", "    autoMitigate: false\n    actions: {}\n"},
			// The alert is gone.
			{bicepDir + "modules/alerts.bicep", "  name: 'orders-audit-failed'\n", "  name: 'orders-audit-failures'\n"},
		},
	},
	{
		name:  "a log alert fires when no deployed audit has written output for longer than the schedule and a run allow",
		check: bicepRule(checkAuditMissingAlert),
		mutations: []mutation{
			{bicepDir + "modules/alerts.bicep", "          metricMeasureColumn: 'lines'\n          operator: 'LessThan'\n", "          metricMeasureColumn: 'lines'\n          operator: 'GreaterThan'\n"},
			// The bootstrap image's output would count as an audit.
			{bicepDir + "modules/alerts.bicep", ` and ContainerImage startswith "${auditImagePrefix}"`, ""},
			{mainFile, "    auditImagePrefix: '${registry.outputs.loginServer}/'\n", "    auditImagePrefix: 'mcr.microsoft.com/'\n"},
			// Grouped rows: with no audit there is no row, and nothing fires.
			{bicepDir + "modules/alerts.bicep", "| summarize lines = count() |", "| summarize lines = count() by ContainerAppName |"},
			// Shorter than a day: the daily audit would alert every day.
			{mainFile, "param auditMaxSilenceHours int = 26", "param auditMaxSilenceHours int = 12"},
			// The query sees only the last hour: it always finds nothing.
			{bicepDir + "modules/alerts.bicep", "    overrideQueryTimeRange: 'P2D'\n", ""},
			{bicepDir + "modules/alerts.bicep", "  name: 'orders-audit-missing'\n", "  name: 'orders-audit-absent'\n"},
		},
	},
}

func checkAuditJob(b *bicep, paramsFile string) error {
	job, err := serviceResource(b, "Microsoft.App/jobs", "audit")
	if err != nil {
		return err
	}
	for path, expr := range map[string]string{
		"properties.configuration.triggerType":                                  "'Schedule'",
		"properties.configuration.replicaRetryLimit":                            "0",
		"properties.configuration.scheduleTriggerConfig.cronExpression":         "auditSchedule",
		"properties.configuration.scheduleTriggerConfig.parallelism":            "1",
		"properties.configuration.scheduleTriggerConfig.replicaCompletionCount": "1",
		"properties.configuration.registries":                                   "[ { server: registryServer identity: auditIdentityId } ]",
		"identity.userAssignedIdentities":                                       "{ '${auditIdentityId}': {} }",
	} {
		v, err := get(job, path)
		if err != nil {
			return err
		}
		if strings.Join(strings.Fields(v), " ") != expr {
			return fmt.Errorf("%v: %s = %s, want %s", job, path, v, expr)
		}
	}
	if v, err := b.moduleParam("modules/containerapps.bicep", "auditIdentityId"); err != nil || v != "auditIdentity.outputs.id" {
		return fmt.Errorf("the audit job's identity is %q (%v), want auditIdentity.outputs.id: its own, read-only identity", v, err)
	}
	if v, err := b.moduleParam("modules/containerapps.bicep", "auditSchedule"); err != nil || v != "auditSchedule" {
		return fmt.Errorf("the audit job's schedule is %q (%v), want main.bicep's auditSchedule", v, err)
	}
	cron, err := b.paramDefault("auditSchedule")
	if err != nil {
		return err
	}
	if n := len(strings.Fields(cron)); n != 5 {
		return fmt.Errorf("auditSchedule default %q has %d fields; Container Apps takes a five-field cron expression", cron, n)
	}
	if !strings.Contains(paramsFile, `"auditSchedule": {`) || !strings.Contains(paramsFile, `"${AUDIT_SCHEDULE=`+cron+`}"`) {
		return fmt.Errorf("main.parameters.json does not set auditSchedule from AUDIT_SCHEDULE with the default %q", cron)
	}
	cs, _ := get(job, "properties.template.containers")
	containers, err := infra.ParseArray(cs)
	if err != nil || len(containers) != 1 {
		return fmt.Errorf("%v: want one container (%v)", job, err)
	}
	args, _ := infra.Lookup(containers[0], "args")
	if strings.Join(strings.Fields(args), " ") != "[ 'audit' ]" {
		return fmt.Errorf("%v: args %s, want [audit]: the job runs orderctl audit", job, args)
	}
	// Every inbox consumer, with the container of its markers, and the
	// relay's leases: otherwise the audit skips those invariants.
	env, err := containerEnv(job)
	if err != nil {
		return err
	}
	for name, expr := range map[string]string{
		"AUDIT_CONSUMERS":         "'${loyaltySubscriptionName}=${cosmosLoyaltyContainerName},${shippingSubscriptionName}=${cosmosShippingContainerName}'",
		"COSMOS_LEASES_CONTAINER": "cosmosLeasesContainerName",
	} {
		if env[name] != expr {
			return fmt.Errorf("%v: %s = %s, want %s", job, name, env[name], expr)
		}
	}
	// The audit-missing alert tells the audit's output by its container's
	// name, so no other container may have it.
	if n, _ := infra.Lookup(containers[0], "name"); n != "'"+auditContainerName+"'" {
		return fmt.Errorf("%v: container name %s, want '%s' (the alerts select its logs by it)", job, n, auditContainerName)
	}
	for _, typ := range []string{"Microsoft.App/jobs", "Microsoft.App/containerApps"} {
		for _, d := range b.all(infra.Resource, typ) {
			if d.Existing || d.Name == job.Name {
				continue
			}
			if strings.Contains(d.Body, "name: '"+auditContainerName+"'") {
				return fmt.Errorf("%v: has a container named %s too: the audit alerts would count its logs as the audit's", d, auditContainerName)
			}
		}
	}
	return nil
}

// auditContainerName is the audit job's container, whose logs the
// audit-missing alert counts.
const auditContainerName = "audit"

// scheduledQuery returns the scheduled query rule named name, its only
// criterion and its query resolved through a var, after checking what every
// log alert of this deployment shares: a log alert on the workspace that
// notifies the action group.
func scheduledQuery(b *bicep, name string) (alert, crit decl, query string, err error) {
	for _, a := range b.all(infra.Resource, "Microsoft.Insights/scheduledQueryRules") {
		if n, _ := infra.Lookup(a.Body, "name"); n != "'"+name+"'" {
			continue
		}
		for path, expr := range map[string]string{
			"kind":               "'LogAlert'",
			"properties.enabled": "true",
			"properties.actions": "logAlertActions",
		} {
			if err := want(a, path, expr); err != nil {
				return a, decl{}, "", err
			}
		}
		scopes, _ := get(a, "properties.scopes")
		sc, err := infra.ParseArray(scopes)
		if err != nil || len(sc) != 1 {
			return a, decl{}, "", fmt.Errorf("%v: want one scope (%v)", a, err)
		}
		if v, err := b.moduleParam(strings.TrimPrefix(a.file, bicepDir), sc[0]); err != nil || v != "monitoring.outputs.id" {
			return a, decl{}, "", fmt.Errorf("%v: scope %s is wired to %q (%v), want monitoring.outputs.id (the workspace)", a, sc[0], v, err)
		}
		allOf, err := get(a, "properties.criteria.allOf")
		if err != nil {
			return a, decl{}, "", err
		}
		cs, err := infra.ParseArray(allOf)
		if err != nil || len(cs) != 1 {
			return a, decl{}, "", fmt.Errorf("%v: want one criterion (%v)", a, err)
		}
		q, _ := infra.Lookup(cs[0], "query")
		if v, ok := b.find(a.file, infra.Var, q); ok {
			q = v.Value
		}
		// An interpolated string ('...${param}...'), kept as written.
		if len(q) < 2 || q[0] != '\'' || q[len(q)-1] != '\'' || strings.Contains(q, "\n") {
			return a, decl{}, "", fmt.Errorf("%v: query %s is not a one-line string", a, q)
		}
		s := q[1 : len(q)-1]
		return a, decl{a.file, infra.Decl{Kind: a.Kind, Name: a.Name, Line: a.Line, Body: cs[0], Value: a.Value}}, s, nil
	}
	return decl{}, decl{}, "", fmt.Errorf("no scheduled query rule %s", name)
}

// checkAuditJobName requires the alerts module's auditJobName to be the audit
// job's name.
func checkAuditJobName(b *bicep) error {
	v, err := b.moduleParam("modules/alerts.bicep", "auditJobName")
	if err != nil {
		return err
	}
	job, err := serviceResource(b, "Microsoft.App/jobs", "audit")
	if err != nil {
		return err
	}
	if out := moduleOutput(b, v); out != job.Name+".name" {
		return fmt.Errorf("the audit alerts watch %s (= %q), want the audit job's name (%s.name)", v, out, job.Name)
	}
	return nil
}

func checkAuditFailedAlert(b *bicep) error {
	if err := checkAuditJobName(b); err != nil {
		return err
	}
	a, c, q, err := scheduledQuery(b, "orders-audit-failed")
	if err != nil {
		return err
	}
	for _, part := range []string{
		"ContainerAppSystemLogs |",
		`where JobName startswith "${auditJobName}"`,
		`Log has "has exited with status Failed"`,
		"| summarize failed = count()",
	} {
		if !strings.Contains(q, part) {
			return fmt.Errorf("%v: query %q lacks %q: it would not see the audit's failed executions", a, q, part)
		}
	}
	for path, expr := range map[string]string{"operator": "'GreaterThan'", "threshold": "0", "timeAggregation": "'Total'", "metricMeasureColumn": "'failed'"} {
		if err := want(c, path, expr); err != nil {
			return err
		}
	}
	// A violation stays until a person looks; the later evaluations that see
	// the same execution do not notify again.
	if err := want(a, "properties.autoMitigate", "false"); err != nil {
		return err
	}
	window, err := isoProp(a, "properties.windowSize")
	if err != nil {
		return err
	}
	freq, err := isoProp(a, "properties.evaluationFrequency")
	if err != nil {
		return err
	}
	mute, err := isoProp(a, "properties.muteActionsDuration")
	if err != nil {
		return err
	}
	if window < freq || mute < window {
		return fmt.Errorf("%v: windowSize %v, evaluationFrequency %v, muteActionsDuration %v: want frequency <= window <= mute, so each failure is seen and notified once", a, window, freq, mute)
	}
	return nil
}

func checkAuditMissingAlert(b *bicep) error {
	if err := checkAuditJobName(b); err != nil {
		return err
	}
	a, c, q, err := scheduledQuery(b, "orders-audit-missing")
	if err != nil {
		return err
	}
	for _, part := range []string{
		"ContainerAppConsoleLogs |",
		"where TimeGenerated > ago(${auditMaxSilenceHours}h)",
		`ContainerName == "` + auditContainerName + `"`,
		`ContainerImage startswith "${auditImagePrefix}"`,
	} {
		if !strings.Contains(q, part) {
			return fmt.Errorf("%v: query %q lacks %q: it would not count the deployed audit's output", a, q, part)
		}
	}
	// One row even when nothing matched: a count of 0, not no row.
	// (A grace period after the first provisioning may follow it: see
	// checkAuditGrace.)
	if body, _, _ := strings.Cut(q, " | where now() > "); !strings.HasSuffix(body, "| summarize lines = count()") {
		return fmt.Errorf("%v: query %q must end in an ungrouped summarize lines = count(), which yields 0 when no audit ran", a, q)
	}
	for path, expr := range map[string]string{"operator": "'LessThan'", "threshold": "1", "timeAggregation": "'Total'", "metricMeasureColumn": "'lines'"} {
		if err := want(c, path, expr); err != nil {
			return err
		}
	}
	if err := want(a, "properties.autoMitigate", "true"); err != nil {
		return err
	}
	if v, err := b.moduleParam("modules/alerts.bicep", "auditImagePrefix"); err != nil || v != "'${registry.outputs.loginServer}/'" {
		return fmt.Errorf("auditImagePrefix is %q (%v), want '${registry.outputs.loginServer}/': only images azd pushed count", v, err)
	}
	// The query's own look-back must fit its time range, and exceed the
	// daily default schedule's period plus the longest run.
	rangeDur, err := isoProp(a, "properties.overrideQueryTimeRange")
	if err != nil {
		return err
	}
	if v, err := b.moduleParam("modules/alerts.bicep", "auditMaxSilenceHours"); err != nil || v != "auditMaxSilenceHours" {
		return fmt.Errorf("auditMaxSilenceHours is passed as %q (%v), want main.bicep's auditMaxSilenceHours", v, err)
	}
	s, err := b.paramDefault("auditMaxSilenceHours")
	if err != nil {
		return err
	}
	hours, err := strconv.Atoi(s)
	if err != nil {
		return fmt.Errorf("auditMaxSilenceHours default %q: %v", s, err)
	}
	silence := time.Duration(hours) * time.Hour
	if silence >= rangeDur {
		return fmt.Errorf("%v: auditMaxSilenceHours %v does not fit the query's time range %v", a, silence, rangeDur)
	}
	cron, err := b.paramDefault("auditSchedule")
	if err != nil {
		return err
	}
	if f := strings.Fields(cron); len(f) != 5 || f[2] != "*" || f[3] != "*" || f[4] != "*" {
		return fmt.Errorf("auditSchedule default %q is not daily: check auditMaxSilenceHours against it", cron)
	}
	timeout, ok := b.find(bicepDir+"modules/containerapps.bicep", infra.Var, "auditReplicaTimeout")
	if !ok {
		return fmt.Errorf("containerapps.bicep has no var auditReplicaTimeout")
	}
	secs, err := strconv.Atoi(timeout.Value)
	if err != nil {
		return fmt.Errorf("auditReplicaTimeout %q: %v", timeout.Value, err)
	}
	if min := 24*time.Hour + time.Duration(secs)*time.Second; silence < min {
		return fmt.Errorf("auditMaxSilenceHours default %v is less than a day plus the audit's timeout (%v): the daily audit would alert as missing", silence, min)
	}
	return nil
}

// isoProp parses the ISO 8601 duration literal at path in d.
func isoProp(d decl, path string) (time.Duration, error) {
	v, err := get(d, path)
	if err != nil {
		return 0, err
	}
	s, ok := infra.Unquote(v)
	if !ok {
		return 0, fmt.Errorf("%v: %s = %s is not a literal", d, path, v)
	}
	dur, err := infra.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%v: %s: %w", d, path, err)
	}
	return dur, nil
}

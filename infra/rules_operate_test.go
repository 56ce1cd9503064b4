package infra_test

import (
	"fmt"
	"strings"

	"github.com/idempotent-consumer/sbcosmos/infra"
	"github.com/idempotent-consumer/sbcosmos/order"
)

// The worker's log line for a message it dead-letters, and the key of its
// reason (worker/logging.go; worker's TestLogOutcome pins both).
const (
	workerDeadLetterMsg = "dead-lettered"
	workerReasonKey     = "reason"
)

// This file holds the rules for operating the deployment in Azure: where the
// logs land, alerts that clear, where the metrics go, the operator's job, the
// indexing policy and the production profile. TestRules and TestRulesCatch
// run them with the others.

var operateRules = []rule{
	{
		// "Dedicated" writes resource-specific tables (ContainerAppConsoleLogs,
		// SBOperationalLogs, CDBDataPlaneRequests); without it Azure writes
		// the legacy AzureDiagnostics table (Microsoft.Insights
		// diagnosticSettings REST reference: "Possible values are: Dedicated
		// and null (null is default.)").
		name:  "every diagnostic setting to Log Analytics writes resource-specific tables",
		check: bicepRule(checkDedicatedDiagnostics),
		mutations: []mutation{
			{bicepDir + "modules/containerapps.bicep", "    logAnalyticsDestinationType: 'Dedicated'\n", ""},
			{bicepDir + "modules/cosmos.bicep", "    logAnalyticsDestinationType: 'Dedicated'\n", "    logAnalyticsDestinationType: 'AzureDiagnostics'\n"},
		},
	},
	{
		// RestartCount is cumulative (microsoft/azure-container-apps #467,
		// #1384): `> 0` never clears after one restart of a long-lived
		// replica, and metric alerts have no delta. The restarts are counted
		// as events in ContainerAppSystemLogs instead, one alert per app.
		name:  "restarts alert on new restart events of every app and clear when there are none",
		check: bicepRule(checkRestartAlert),
		mutations: []mutation{
			{bicepDir + "modules/alerts.bicep", "    autoMitigate: true\n    actions: logAlertActions\n  }\n}\n\n// Mismatches", "    autoMitigate: false\n    actions: logAlertActions\n  }\n}\n\n// Mismatches"},
			{bicepDir + "modules/alerts.bicep", "var restartQuery = 'ContainerAppSystemLogs |", "var restartQuery = 'ContainerAppConsoleLogs |"},
			// Only the worker's restarts.
			{bicepDir + "modules/alerts.bicep", "          metricMeasureColumn: 'restarts'\n          operator: 'GreaterThan'\n          threshold: 0\n          dimensions: [\n            {\n              name: 'ContainerAppName'\n              operator: 'Include'\n              values: [\n                '*'\n", "          metricMeasureColumn: 'restarts'\n          operator: 'GreaterThan'\n          threshold: 0\n          dimensions: [\n            {\n              name: 'ContainerAppName'\n              operator: 'Include'\n              values: [\n                'ca-worker'\n"},
			{mainFile, "    logAnalyticsWorkspaceId: monitoring.outputs.id\n    location: location\n", "    logAnalyticsWorkspaceId: ''\n    location: location\n"},
			// Back to the cumulative metric.
			{bicepDir + "modules/alerts.bicep", "          metricName: 'ActiveMessages'\n", "          metricName: 'RestartCount'\n"},
		},
	},
	{
		// The agent's Application Insights destination takes no metrics
		// ("The Application Insights endpoint doesn't accept metrics"), and
		// OTLP ingestion into an Azure Monitor workspace needs a collector
		// that authenticates with Microsoft Entra ID. With no metrics
		// destination on the agent, the programs must not export metrics
		// into it.
		name:  "no program exports metrics to an OpenTelemetry agent that has no metrics destination",
		check: bicepRule(checkMetricsDestination),
		mutations: []mutation{
			{bicepDir + "modules/containerapps.bicep", "var otlpMetricsExporter = 'none'\n", "var otlpMetricsExporter = 'otlp'\n"},
		},
	},
	{
		// The worker logs each dead-lettering as a JSON line with msg
		// "dead-lettered" and the key reason (worker/logging.go); the reason
		// is order.ReasonOrderIDReused for a mismatch.
		name:  "a log alert fires on OrderIdReused dead letters, by reason",
		check: bicepRule(checkMismatchAlert),
		mutations: []mutation{
			{bicepDir + "modules/alerts.bicep", "                'OrderIdReused'\n", "                'OrderIDReused'\n"},
			{bicepDir + "modules/alerts.bicep", "where tostring(entry.msg) == \"dead-lettered\"", "where tostring(entry.msg) == \"dead lettered\""},
			{bicepDir + "modules/alerts.bicep", "| extend reason = tostring(entry.reason) |", "| extend reason = tostring(entry.cause) |"},
			{bicepDir + "modules/alerts.bicep", "var deadLetterQuery = 'ContainerAppConsoleLogs |", "var deadLetterQuery = 'ContainerAppSystemLogs |"},
		},
	},
	{
		// orderctl in Azure: a job started by hand (the worker scales to zero
		// and its identity may not send), as its own identity, whose
		// template's args only peek.
		name:  "orderctl is a manually triggered job with its own identity whose default run only peeks",
		check: bicepRule(checkOrderctlJob),
		mutations: []mutation{
			{bicepDir + "modules/containerapps.bicep", "          args: [\n            'dlq'\n            'list'\n          ]\n", "          args: [\n            'dlq'\n            'purge'\n            '-all'\n            '-yes'\n          ]\n"},
			{bicepDir + "modules/containerapps.bicep", "      replicaTimeout: 900\n      replicaRetryLimit: 0\n", "      replicaTimeout: 900\n      replicaRetryLimit: 3\n"},
		},
	},
	{
		// Only the audit queries the container, one partition at a time (TestNothingQueriesTheStore), so
		// indexing any path only adds write RUs: about 0.2 RU per indexed
		// term (Microsoft, "Understand request units consumption").
		name:  "the orders container indexes no path, since nothing queries it but the audit, one partition at a time",
		check: bicepRule(checkIndexingPolicy),
		mutations: []mutation{
			{bicepDir + "modules/cosmos.bicep", "        includedPaths: []\n", "        includedPaths: [\n          {\n            path: '/*'\n          }\n        ]\n"},
			{bicepDir + "modules/cosmos.bicep", "            path: '/*'\n", "            path: '/\"_etag\"/?'\n"},
			{bicepDir + "modules/cosmos.bicep", "        indexingMode: 'consistent'\n", "        indexingMode: 'lazy'\n"},
		},
	},
}

func checkIndexingPolicy(b *bicep) error {
	cs, err := b.created("Microsoft.DocumentDB/databaseAccounts/sqlDatabases/containers")
	if err != nil {
		return err
	}
	for _, c := range cs {
		for path, expr := range map[string]string{
			"properties.resource.indexingPolicy.indexingMode":  "'consistent'",
			"properties.resource.indexingPolicy.automatic":     "true",
			"properties.resource.indexingPolicy.includedPaths": "[]",
		} {
			if err := want(c, path, expr); err != nil {
				return err
			}
		}
		ex, err := get(c, "properties.resource.indexingPolicy.excludedPaths")
		if err != nil {
			return err
		}
		if strings.Join(strings.Fields(ex), " ") != "[ { path: '/*' } ]" {
			return fmt.Errorf("%v: excludedPaths %s, want exactly '/*': only the audit queries the container, one partition at a time, which needs no index", c, ex)
		}
	}
	return nil
}

func checkOrderctlJob(b *bicep) error {
	job, err := serviceResource(b, "Microsoft.App/jobs", "orderctl")
	if err != nil {
		return err
	}
	// A retried run would repeat a resubmission or a purge.
	for path, expr := range map[string]string{
		"properties.configuration.triggerType":       "'Manual'",
		"properties.configuration.replicaRetryLimit": "0",
	} {
		if err := want(job, path, expr); err != nil {
			return err
		}
	}
	cs, _ := get(job, "properties.template.containers")
	containers, err := infra.ParseArray(cs)
	if err != nil || len(containers) != 1 {
		return fmt.Errorf("%v: want one container (%v)", job, err)
	}
	args, _ := infra.Lookup(containers[0], "args")
	if strings.Join(strings.Fields(args), " ") != "[ 'dlq' 'list' ]" {
		return fmt.Errorf("%v: args %s, want [dlq list]: a start without new args must only peek", job, args)
	}
	return nil
}

func checkMismatchAlert(b *bicep) error {
	c, q, err := logAlert(b, "orders-mismatch")
	if err != nil {
		return err
	}
	for _, part := range []string{
		"ContainerAppConsoleLogs | extend entry = parse_json(Log)",
		`where tostring(entry.msg) == "` + workerDeadLetterMsg + `"`,
		`extend reason = tostring(entry.` + workerReasonKey + `)`,
		"by reason",
	} {
		if !strings.Contains(q, part) {
			return fmt.Errorf("%v: query %q lacks %q: it would not see the worker's dead-letter log lines", c, q, part)
		}
	}
	dims, err := get(c, "dimensions")
	if err != nil {
		return err
	}
	if !strings.Contains(strings.Join(strings.Fields(dims), " "), "{ name: 'reason' operator: 'Include' values: [ '"+order.ReasonOrderIDReused+"' ] }") {
		return fmt.Errorf("%v: dimensions %s do not select reason %s", c, dims, order.ReasonOrderIDReused)
	}
	return want(c, "threshold", "0")
}

func checkMetricsDestination(b *bicep) error {
	envs, err := b.created("Microsoft.App/managedEnvironments")
	if err != nil {
		return err
	}
	for _, e := range envs {
		if d, ok := infra.Lookup(e.Body, "properties.openTelemetryConfiguration.metricsConfiguration.destinations"); ok && strings.TrimSpace(strings.Trim(d, "[]\n ")) != "" {
			continue // a destination takes them
		}
		apps, err := allContainers(b)
		if err != nil {
			return err
		}
		for _, app := range apps {
			env, err := containerEnv(app)
			if err != nil {
				return err
			}
			v := env["OTEL_METRICS_EXPORTER"]
			if d, ok := b.find(app.file, infra.Var, v); ok {
				v = d.Value
			}
			if v != "'none'" {
				return fmt.Errorf("%v: OTEL_METRICS_EXPORTER = %q, want 'none': %v has no metrics destination, so the metrics the agent receives go nowhere", app, env["OTEL_METRICS_EXPORTER"], e)
			}
		}
	}
	return nil
}

// logAlert returns the scheduled query rule named name and its first
// criterion's query, resolved through a var of its file.
func logAlert(b *bicep, name string) (decl, string, error) {
	for _, a := range b.all(infra.Resource, "Microsoft.Insights/scheduledQueryRules") {
		if n, _ := infra.Lookup(a.Body, "name"); n != "'"+name+"'" {
			continue
		}
		allOf, err := get(a, "properties.criteria.allOf")
		if err != nil {
			return a, "", err
		}
		cs, err := infra.ParseArray(allOf)
		if err != nil || len(cs) != 1 {
			return a, "", fmt.Errorf("%v: want one criterion (%v)", a, err)
		}
		q, _ := infra.Lookup(cs[0], "query")
		if v, ok := b.find(a.file, infra.Var, q); ok {
			q = v.Value
		}
		s, ok := infra.Unquote(q)
		if !ok {
			return a, "", fmt.Errorf("%v: query %s is not a literal", a, q)
		}
		for path, expr := range map[string]string{
			"properties.autoMitigate": "true",
			"properties.actions":      "logAlertActions",
			"kind":                    "'LogAlert'",
		} {
			if err := want(a, path, expr); err != nil {
				return a, "", err
			}
		}
		scopes, _ := get(a, "properties.scopes")
		sc, err := infra.ParseArray(scopes)
		if err != nil || len(sc) != 1 {
			return a, "", fmt.Errorf("%v: want one scope (%v)", a, err)
		}
		if v, err := b.moduleParam(strings.TrimPrefix(a.file, bicepDir), sc[0]); err != nil || v != "monitoring.outputs.id" {
			return a, "", fmt.Errorf("%v: scope %s is wired to %q (%v), want monitoring.outputs.id (the workspace)", a, sc[0], v, err)
		}
		return decl{a.file, infra.Decl{Kind: a.Kind, Name: a.Name, Line: a.Line, Body: cs[0], Value: a.Value}}, s, nil
	}
	return decl{}, "", fmt.Errorf("no scheduled query rule %s", name)
}

func checkRestartAlert(b *bicep) error {
	for _, a := range b.all(infra.Resource, "Microsoft.Insights/metricAlerts") {
		if strings.Contains(a.Body, "'RestartCount'") {
			return fmt.Errorf("%v: alerts on RestartCount, which is cumulative: the alert would never clear", a)
		}
	}
	c, q, err := logAlert(b, "orders-restarts")
	if err != nil {
		return err
	}
	if !strings.HasPrefix(q, "ContainerAppSystemLogs |") {
		return fmt.Errorf("%v: query %q does not read ContainerAppSystemLogs, where the platform's restart events are", c, q)
	}
	for _, reason := range []string{`"ContainerTerminated"`, `"ProbeFailed"`} {
		if !strings.Contains(q, reason) {
			return fmt.Errorf("%v: query does not count %s events", c, reason)
		}
	}
	if strings.Contains(q, "ContainerAppName ==") || strings.Contains(q, "ContainerAppName in") {
		return fmt.Errorf("%v: query selects apps; every app's restarts count", c)
	}
	dims, err := get(c, "dimensions")
	if err != nil {
		return err
	}
	if strings.Join(strings.Fields(dims), " ") != "[ { name: 'ContainerAppName' operator: 'Include' values: [ '*' ] } ]" {
		return fmt.Errorf("%v: dimensions %s, want ContainerAppName Include '*' (one alert per app)", c, dims)
	}
	for path, expr := range map[string]string{"operator": "'GreaterThan'", "threshold": "0", "timeAggregation": "'Total'", "metricMeasureColumn": "'restarts'"} {
		if err := want(c, path, expr); err != nil {
			return err
		}
	}
	return nil
}

func checkDedicatedDiagnostics(b *bicep) error {
	ds, err := b.created("Microsoft.Insights/diagnosticSettings")
	if err != nil {
		return err
	}
	for _, d := range ds {
		if _, ok := infra.Lookup(d.Body, "properties.workspaceId"); !ok {
			continue
		}
		v, _ := infra.Lookup(d.Body, "properties.logAnalyticsDestinationType")
		if v != "'Dedicated'" {
			return fmt.Errorf("%v: logAnalyticsDestinationType = %q, want 'Dedicated' (resource-specific tables; the default is the legacy AzureDiagnostics table)", d, v)
		}
	}
	return nil
}

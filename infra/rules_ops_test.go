package infra_test

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/idempotent-consumer/sbcosmos/infra"
)

// This file holds the rules for operations (Application Insights, the
// OpenTelemetry agent, diagnostic settings, alerts, probes) and for
// publish/subscribe (the order-events topic, its subscriptions, the relay and
// the subscribers). TestRules and TestRulesCatch run them with the others.

// Unique pieces of the templates that the mutations edit.
const (
	// queueDupDetection is the orders queue's settings, not the topic's.
	queueDupDetection = "    requiresDuplicateDetection: true\n    duplicateDetectionHistoryTimeWindow: duplicateDetectionWindow\n    lockDuration: lockDuration\n"
	// workerScaleRule is the worker's KEDA rule, not a subscriber's.
	workerScaleRule = "            name: 'orders-queue-length'\n            custom: {\n              type: 'azure-servicebus'\n              identity: scalerIdentityId\n"
	// workerIdentitySettings is the worker's, after its comment.
	workerIdentitySettings = "      // token for it. The worker identity keeps the default (All).\n      identitySettings: [\n        {\n          identity: scalerIdentityId\n          lifecycle: 'None'\n"
)

// The worker's shutdown, from package worker's defaults: after SIGTERM the
// receive in progress may collect for ReceiveDrain (1s), in-flight handlers
// run for WORKER_SHUTDOWN_GRACE, and each settlement of a cut-off message is
// bounded by SettleTimeout (20s). The platform must wait for all of it.
const (
	workerReceiveDrain  = time.Second
	workerSettleTimeout = 20 * time.Second
)

// The health endpoints of internal/health and its checks' own bound.
const healthCheckTimeout = 5 * time.Second

var healthPaths = map[string]string{"Startup": "'/startupz'", "Liveness": "'/livez'", "Readiness": "'/readyz'"}

var opsRules = []rule{
	{
		name:  "the order-events topic detects duplicates and its subscriptions redeliver, dead-letter and expire as the queue does",
		check: bicepRule(checkTopic),
		mutations: []mutation{
			{bicepDir + "modules/servicebus.bicep", "    requiresDuplicateDetection: true\n    duplicateDetectionHistoryTimeWindow: duplicateDetectionWindow\n    defaultMessageTimeToLive", "    requiresDuplicateDetection: false\n    duplicateDetectionHistoryTimeWindow: duplicateDetectionWindow\n    defaultMessageTimeToLive"},
			{bicepDir + "modules/servicebus.bicep", "    duplicateDetectionHistoryTimeWindow: duplicateDetectionWindow\n    defaultMessageTimeToLive", "    duplicateDetectionHistoryTimeWindow: 'PT1M'\n    defaultMessageTimeToLive"},
			{bicepDir + "modules/servicebus.bicep", "  name: shippingSubscriptionName\n  properties: {\n    lockDuration: lockDuration\n", "  name: shippingSubscriptionName\n  properties: {\n    lockDuration: 'PT5M'\n"},
			{bicepDir + "modules/servicebus.bicep", "    defaultMessageTimeToLive: messageTimeToLive\n    deadLetteringOnMessageExpiration: true\n    deadLetteringOnFilterEvaluationExceptions: true\n    requiresSession: false\n  }\n}\n\nresource namespaceDiagnostics", "    defaultMessageTimeToLive: messageTimeToLive\n    deadLetteringOnMessageExpiration: false\n    deadLetteringOnFilterEvaluationExceptions: true\n    requiresSession: false\n  }\n}\n\nresource namespaceDiagnostics"},
			{mainFile, "param topicName string = 'order-events'", "param topicName string = 'orders'"},
		},
	},
	{
		name:  "the relay runs alone and each subscriber receives its own subscription in inbox mode, scaled by KEDA",
		check: bicepRule(checkPubSubApps),
		mutations: []mutation{
			// The loyalty subscriber scales on the shipping subscription.
			{bicepDir + "modules/containerapps.bicep", "                subscriptionName: loyaltySubscriptionName\n", "                subscriptionName: shippingSubscriptionName\n"},
			// Its inbox consumer is not its subscription.
			{bicepDir + "modules/containerapps.bicep", "              name: 'WORKER_INBOX_CONSUMER'\n              value: loyaltySubscriptionName\n", "              name: 'WORKER_INBOX_CONSUMER'\n              value: 'orderworker'\n"},
			// It receives from the other subscription.
			{bicepDir + "modules/containerapps.bicep", "              name: 'SERVICEBUS_SUBSCRIPTION'\n              value: shippingSubscriptionName\n", "              name: 'SERVICEBUS_SUBSCRIPTION'\n              value: loyaltySubscriptionName\n"},
			// Main wires the subscription names crosswise.
			{mainFile, "    loyaltySubscriptionName: serviceBus.outputs.loyaltySubscriptionName\n", "    loyaltySubscriptionName: serviceBus.outputs.shippingSubscriptionName\n"},
			// The relay scales to zero: nothing would follow the change feed.
			{bicepDir + "modules/containerapps.bicep", "        minReplicas: relayReplicas\n        maxReplicas: relayReplicas\n", "        minReplicas: 0\n        maxReplicas: relayReplicas\n"},
			// The scale rule authenticates with the subscriber's own identity.
			{bicepDir + "modules/containerapps.bicep", "            name: 'shipping-subscription-length'\n            custom: {\n              type: 'azure-servicebus'\n              identity: scalerIdentityId\n", "            name: 'shipping-subscription-length'\n            custom: {\n              type: 'azure-servicebus'\n              identity: shippingIdentityId\n"},
		},
	},
	{
		name:  "Application Insights is workspace-based and receives the environment's traces through the OpenTelemetry agent",
		check: bicepRule(checkTelemetry),
		mutations: []mutation{
			{bicepDir + "modules/monitoring.bicep", "    WorkspaceResourceId: workspace.id\n", ""},
			{bicepDir + "modules/monitoring.bicep", "    IngestionMode: 'LogAnalytics'\n", "    IngestionMode: 'ApplicationInsights'\n"},
			// The agent cannot ingest into a resource that refuses local auth.
			{bicepDir + "modules/monitoring.bicep", "    DisableLocalAuth: false\n", "    DisableLocalAuth: true\n"},
			{bicepDir + "modules/containerapps.bicep", "      tracesConfiguration: {\n        destinations: [\n          'appInsights'\n        ]\n      }\n", ""},
			// Application Insights accepts no metrics from the agent.
			{bicepDir + "modules/containerapps.bicep", "    openTelemetryConfiguration: {\n", "    openTelemetryConfiguration: {\n      metricsConfiguration: {\n        destinations: [\n          'appInsights'\n        ]\n      }\n"},
			{mainFile, "    appInsightsName: monitoring.outputs.appInsightsName\n", "    appInsightsName: 'appi-other'\n"},
		},
	},
	{
		name:  "the Service Bus namespace and the Cosmos DB account send their logs to the Log Analytics workspace",
		check: bicepRule(checkDiagnostics),
		mutations: []mutation{
			{bicepDir + "modules/servicebus.bicep", "resource namespaceDiagnostics 'Microsoft.Insights/diagnosticSettings@2021-05-01-preview' = {\n  scope: namespace\n", "resource namespaceDiagnostics 'Microsoft.Insights/diagnosticSettings@2021-05-01-preview' = {\n  scope: queue\n"},
			{bicepDir + "modules/cosmos.bicep", "        categoryGroup: 'allLogs'\n", "        categoryGroup: 'audit'\n"},
			{mainFile, "    auditPrincipalId: auditIdentity.outputs.principalId\n    logAnalyticsWorkspaceId: monitoring.outputs.id\n    developerPrincipalId: principalId\n    profile: profile\n  }\n", "    auditPrincipalId: auditIdentity.outputs.principalId\n    logAnalyticsWorkspaceId: ''\n    developerPrincipalId: principalId\n    profile: profile\n  }\n"},
		},
	},
	{
		name:  "metric alerts watch dead letters, backlog and Cosmos DB throttling, and mail the operator when an address is set",
		check: func(r repo) error { return checkAlerts(r) },
		mutations: []mutation{
			{bicepDir + "modules/alerts.bicep", "          metricName: 'DeadletteredMessages'\n          timeAggregation: 'Maximum'\n          operator: 'GreaterThan'\n          threshold: 0\n", "          metricName: 'DeadletteredMessages'\n          timeAggregation: 'Maximum'\n          operator: 'GreaterThan'\n          threshold: 10\n"},
			{bicepDir + "modules/alerts.bicep", "metricName: 'ActiveMessages'", "metricName: 'Messages'"},
			{bicepDir + "modules/alerts.bicep", "              values: [\n                '429'\n              ]\n", "              values: [\n                '503'\n              ]\n"},
			{bicepDir + "modules/alerts.bicep", "resource actionGroup 'Microsoft.Insights/actionGroups@2023-01-01' = if (notify) {", "resource actionGroup 'Microsoft.Insights/actionGroups@2023-01-01' = {"},
			{bicepDir + "modules/alerts.bicep", "          threshold: backlogThreshold\n          dimensions: [\n            {\n              name: 'EntityName'\n              operator: 'Include'\n              values: serviceBusEntities\n            }\n          ]\n        }\n      ]\n    }\n    actions: alertActions\n", "          threshold: backlogThreshold\n          dimensions: [\n            {\n              name: 'EntityName'\n              operator: 'Include'\n              values: serviceBusEntities\n            }\n          ]\n        }\n      ]\n    }\n    actions: []\n"},
			{mainFile, "      serviceBus.outputs.topicName\n    ]\n", "    ]\n"},
			{bicepDir + "main.parameters.json", `"${ALERT_EMAIL=}"`, `"ops@example.com"`},
		},
	},
	{
		name:  "the worker and the subscribers have startup, liveness and readiness probes on their health port, and outlive their shutdown",
		check: bicepRule(checkProbes),
		mutations: []mutation{
			{bicepDir + "modules/containerapps.bicep", "      path: '/livez'\n", "      path: '/healthz'\n"},
			{bicepDir + "modules/containerapps.bicep", "var healthPort = 8080\n", "var healthPort = 80\n"},
			// The bootstrap image probed on the health port it does not serve.
			{bicepDir + "modules/containerapps.bicep", "          probes: shippingExists ? workerProbes : []\n", "          probes: workerProbes\n"},
			{bicepDir + "modules/containerapps.bicep", "var terminationGracePeriodSeconds = 60\n", "var terminationGracePeriodSeconds = 30\n"},
			{bicepDir + "modules/containerapps.bicep", "var workerShutdownGrace = 'PT30S'\n", "var workerShutdownGrace = 'PT50S'\n"},
			{bicepDir + "modules/containerapps.bicep", "    periodSeconds: 10\n    timeoutSeconds: 10\n", "    periodSeconds: 10\n    timeoutSeconds: 5\n"},
			{bicepDir + "modules/containerapps.bicep", "          probes: loyaltyExists ? workerProbes : []\n        }\n      ]\n      terminationGracePeriodSeconds: terminationGracePeriodSeconds\n      scale: {\n        minReplicas: 0\n        maxReplicas: subscriberMaxReplicas\n        rules: [\n          {\n            name: 'loyalty", "        }\n      ]\n      terminationGracePeriodSeconds: terminationGracePeriodSeconds\n      scale: {\n        minReplicas: 0\n        maxReplicas: subscriberMaxReplicas\n        rules: [\n          {\n            name: 'loyalty"},
			{bicepDir + "modules/containerapps.bicep", "              name: 'WORKER_HEALTH_ADDR'\n              value: ':${healthPort}'\n            }\n            {\n              name: 'WORKER_SHUTDOWN_GRACE'\n              value: workerShutdownGrace\n            }\n          ]\n          probes: workerExists ? workerProbes : []\n        }\n      ]\n      terminationGracePeriodSeconds: terminationGracePeriodSeconds\n      scale: {\n        minReplicas: minReplicas", "              name: 'WORKER_HEALTH_ADDR'\n              value: '127.0.0.1:${healthPort}'\n            }\n            {\n              name: 'WORKER_SHUTDOWN_GRACE'\n              value: workerShutdownGrace\n            }\n          ]\n          probes: workerExists ? workerProbes : []\n        }\n      ]\n      terminationGracePeriodSeconds: terminationGracePeriodSeconds\n      scale: {\n        minReplicas: minReplicas"},
			{bicepDir + "modules/containerapps.bicep", "    configuration: {\n      activeRevisionsMode: 'Single'\n      registries: [\n        {\n          server: registryServer\n          identity: workerIdentityId\n", "    configuration: {\n      activeRevisionsMode: 'Single'\n      ingress: {\n        external: true\n        targetPort: 8080\n      }\n      registries: [\n        {\n          server: registryServer\n          identity: workerIdentityId\n"},
		},
	},
}

// subResource returns the resource named sym in file, created (not existing).
func subResource(b *bicep, file, sym string) (decl, error) {
	d, ok := b.find(file, infra.Resource, sym)
	if !ok || d.Existing {
		return decl{}, fmt.Errorf("%s has no resource %s", file, sym)
	}
	return d, nil
}

func checkTopic(b *bicep) error {
	const sb = bicepDir + "modules/servicebus.bicep"
	for param, def := range map[string]string{"topicName": "order-events", "loyaltySubscriptionName": "loyalty", "shippingSubscriptionName": "shipping"} {
		if v, err := b.paramDefault(param); err != nil || v != def {
			return fmt.Errorf("main.bicep: param %s default %q (%v), want %q", param, v, err, def)
		}
		if v, err := b.moduleParam("modules/servicebus.bicep", param); err != nil || v != param {
			return fmt.Errorf("main.bicep passes %s = %q to servicebus.bicep (%v), want main's %s", param, v, err, param)
		}
	}
	topics, err := b.created("Microsoft.ServiceBus/namespaces/topics")
	if err != nil {
		return err
	}
	if len(topics) != 1 {
		return fmt.Errorf("%d topics, want 1", len(topics))
	}
	t := topics[0]
	for path, expr := range map[string]string{
		"name":                                  "topicName",
		"properties.requiresDuplicateDetection": "true",
		"properties.duplicateDetectionHistoryTimeWindow": "duplicateDetectionWindow", // the queue's
		"properties.defaultMessageTimeToLive":            "messageTimeToLive",
	} {
		if err := want(t, path, expr); err != nil {
			return err
		}
	}
	subs, err := b.created("Microsoft.ServiceBus/namespaces/topics/subscriptions")
	if err != nil {
		return err
	}
	names := map[string]bool{}
	for _, s := range subs {
		if err := want(s, "parent", t.Name); err != nil {
			return err
		}
		n, _ := get(s, "name")
		names[n] = true
		for path, expr := range map[string]string{
			"properties.lockDuration":                     "lockDuration",
			"properties.maxDeliveryCount":                 "maxDeliveryCount",
			"properties.defaultMessageTimeToLive":         "messageTimeToLive",
			"properties.deadLetteringOnMessageExpiration": "true",
			"properties.requiresSession":                  "false",
		} {
			if err := want(s, path, expr); err != nil {
				return err
			}
		}
	}
	if len(subs) != 2 || !names["loyaltySubscriptionName"] || !names["shippingSubscriptionName"] {
		return fmt.Errorf("subscriptions named %v, want loyaltySubscriptionName and shippingSubscriptionName", names)
	}
	if _, err := subResource(b, sb, "loyaltySubscription"); err != nil {
		return err
	}
	return nil
}

func checkPubSubApps(b *bicep) error {
	const ca = "modules/containerapps.bicep"
	relay, err := serviceResource(b, "Microsoft.App/containerApps", "relay")
	if err != nil {
		return err
	}
	// Always running: the change feed is polled, so a relay scaled to zero
	// would never wake up; several are safe (ETag-guarded leases), and
	// production runs one per zone (checkProductionShape).
	if err := want(relay, "properties.template.scale.minReplicas", "relayReplicas"); err != nil {
		return err
	}
	if err := want(relay, "properties.template.scale.maxReplicas", "relayReplicas"); err != nil {
		return err
	}
	env, err := containerEnv(relay)
	if err != nil {
		return err
	}
	if env["SERVICEBUS_TOPIC"] != "topicName" {
		return fmt.Errorf("%v: SERVICEBUS_TOPIC = %s, want topicName", relay, env["SERVICEBUS_TOPIC"])
	}
	if v, err := b.moduleParam(ca, "topicName"); err != nil || v != "serviceBus.outputs.topicName" {
		return fmt.Errorf("containerapps.bicep topicName = %q (%v), want serviceBus.outputs.topicName", v, err)
	}
	for _, sub := range []string{"loyalty", "shipping"} {
		app, err := serviceResource(b, "Microsoft.App/containerApps", sub)
		if err != nil {
			return err
		}
		param := sub + "SubscriptionName"
		if v, err := b.moduleParam(ca, param); err != nil || v != "serviceBus.outputs."+param {
			return fmt.Errorf("containerapps.bicep %s = %q (%v), want serviceBus.outputs.%s", param, v, err, param)
		}
		env, err := containerEnv(app)
		if err != nil {
			return err
		}
		for name, expr := range map[string]string{"SERVICEBUS_TOPIC": "topicName", "SERVICEBUS_SUBSCRIPTION": param, "WORKER_INBOX_CONSUMER": param} {
			if env[name] != expr {
				return fmt.Errorf("%v: %s = %s, want %s", app, name, env[name], expr)
			}
		}
		rulesExpr, err := get(app, "properties.template.scale.rules")
		if err != nil {
			return err
		}
		rs, err := infra.ParseArray(rulesExpr)
		if err != nil {
			return err
		}
		if len(rs) != 1 {
			return fmt.Errorf("%v: %d scale rules, want 1", app, len(rs))
		}
		custom, ok := infra.Lookup(rs[0], "custom")
		if !ok {
			return fmt.Errorf("%v: scale rule is not a custom (KEDA) rule", app)
		}
		for path, expr := range map[string]string{
			"type":                      "'azure-servicebus'",
			"metadata.namespace":        "serviceBusNamespaceName",
			"metadata.topicName":        "topicName",
			"metadata.subscriptionName": param,
		} {
			if v, _ := infra.Lookup(custom, path); v != expr {
				return fmt.Errorf("%v: scale rule %s = %q, want %s", app, path, v, expr)
			}
		}
		id, _ := infra.Lookup(custom, "identity")
		if v, err := b.moduleParam(ca, id); err != nil || v != "scalerIdentity.outputs.id" {
			return fmt.Errorf("%v: scale rule identity %s is wired to %q (%v), want scalerIdentity.outputs.id", app, id, v, err)
		}
	}
	return nil
}

var connectionStringRE = regexp.MustCompile(`^(\w+)\.properties\.ConnectionString$`)

// appInsightsConnectionStrings returns, by file, the one line of each
// managed environment that may name a connection string: its
// appInsightsConfiguration.connectionString, read from an Application
// Insights component of the same file. The connection string holds the
// component's instrumentation key, an identifier the documentation says is
// not a secret; the managed OpenTelemetry agent can ingest with nothing else.
func appInsightsConnectionStrings(b *bicep) (map[string][]string, error) {
	out := map[string][]string{}
	for _, env := range b.all(infra.Resource, "Microsoft.App/managedEnvironments") {
		v, ok := infra.Lookup(env.Body, "properties.appInsightsConfiguration.connectionString")
		if !ok {
			continue
		}
		m := connectionStringRE.FindStringSubmatch(v)
		if m == nil {
			return nil, fmt.Errorf("%v: appInsightsConfiguration.connectionString = %s, want <component>.properties.ConnectionString", env, v)
		}
		c, ok := b.find(env.file, infra.Resource, m[1])
		if !ok || !strings.EqualFold(c.Type, "Microsoft.Insights/components") {
			return nil, fmt.Errorf("%v: connection string from %s, which is not an Application Insights component", env, m[1])
		}
		out[env.file] = append(out[env.file], "connectionString: "+v)
	}
	return out, nil
}

// withoutLines removes, once each, the lines of text whose trimmed content is
// one of lines.
func withoutLines(text string, lines []string) string {
	for _, l := range lines {
		parts := strings.SplitAfter(text, "\n")
		for i, p := range parts {
			if strings.TrimSpace(p) == l {
				text = strings.Join(append(parts[:i:i], parts[i+1:]...), "")
				break
			}
		}
	}
	return text
}

func checkTelemetry(b *bicep) error {
	comps, err := b.created("Microsoft.Insights/components")
	if err != nil {
		return err
	}
	if len(comps) != 1 {
		return fmt.Errorf("%d Application Insights components, want 1", len(comps))
	}
	c := comps[0]
	ws, ok := infra.Lookup(c.Body, "properties.WorkspaceResourceId")
	if !ok {
		return fmt.Errorf("%v: not workspace-based (no WorkspaceResourceId)", c)
	}
	sym, isID := strings.CutSuffix(ws, ".id")
	w, found := b.find(c.file, infra.Resource, sym)
	if !isID || !found || !strings.EqualFold(w.Type, "Microsoft.OperationalInsights/workspaces") {
		return fmt.Errorf("%v: WorkspaceResourceId = %s, want the Log Analytics workspace's id", c, ws)
	}
	if err := want(c, "properties.IngestionMode", "'LogAnalytics'"); err != nil {
		return err
	}
	// The agent ingests with the instrumentation key only.
	if err := want(c, "properties.DisableLocalAuth", "false"); err != nil {
		return fmt.Errorf("%w: the managed OpenTelemetry agent needs local authentication", err)
	}
	envs, err := b.created("Microsoft.App/managedEnvironments")
	if err != nil {
		return err
	}
	for _, e := range envs {
		cs, err := get(e, "properties.appInsightsConfiguration.connectionString")
		if err != nil {
			return err
		}
		m := connectionStringRE.FindStringSubmatch(cs)
		if m == nil {
			return fmt.Errorf("%v: connection string %s is not a component's", e, cs)
		}
		ref, ok := b.find(e.file, infra.Resource, m[1])
		if !ok {
			return fmt.Errorf("%v: no resource %s", e, m[1])
		}
		name, _ := get(ref, "name")
		if v, err := b.moduleParam(strings.TrimPrefix(e.file, bicepDir), name); err != nil || v != "monitoring.outputs.appInsightsName" {
			return fmt.Errorf("%v: Application Insights %s is %q (%v), want monitoring.outputs.appInsightsName", e, name, v, err)
		}
		for _, signal := range []string{"traces"} {
			d, err := get(e, "properties.openTelemetryConfiguration."+signal+"Configuration.destinations")
			if err != nil {
				return err
			}
			if !strings.Contains(d, "'appInsights'") {
				return fmt.Errorf("%v: %s destinations %s lack 'appInsights'", e, signal, d)
			}
		}
		// "The Application Insights endpoint doesn't accept metrics."
		if d, ok := infra.Lookup(e.Body, "properties.openTelemetryConfiguration.metricsConfiguration.destinations"); ok && strings.Contains(d, "'appInsights'") {
			return fmt.Errorf("%v: metrics sent to appInsights, which accepts none from the agent", e)
		}
	}
	return nil
}

func checkDiagnostics(b *bicep) error {
	for _, typ := range []string{"Microsoft.ServiceBus/namespaces", "Microsoft.DocumentDB/databaseAccounts"} {
		targets, err := b.created(typ)
		if err != nil {
			return err
		}
		for _, t := range targets {
			found := false
			for _, ds := range b.all(infra.Resource, "Microsoft.Insights/diagnosticSettings") {
				if ds.file != t.file {
					continue
				}
				if s, _ := infra.Lookup(ds.Body, "scope"); s != t.Name {
					continue
				}
				found = true
				wsExpr, err := get(ds, "properties.workspaceId")
				if err != nil {
					return err
				}
				if v, err := b.moduleParam(strings.TrimPrefix(ds.file, bicepDir), wsExpr); err != nil || v != "monitoring.outputs.id" {
					return fmt.Errorf("%v: workspaceId %s is wired to %q (%v), want monitoring.outputs.id", ds, wsExpr, v, err)
				}
				logs, err := get(ds, "properties.logs")
				if err != nil {
					return err
				}
				if !strings.Contains(logs, "categoryGroup: 'allLogs'") || !strings.Contains(logs, "enabled: true") {
					return fmt.Errorf("%v: logs %s do not enable categoryGroup allLogs", ds, logs)
				}
			}
			if !found {
				return fmt.Errorf("%v: no diagnostic setting scoped to it", t)
			}
		}
	}
	return nil
}

// alertWant is one alert the deployment must have: a static threshold on a
// platform metric.
type alertWant struct {
	namespace, metric, operator, threshold string
	dimension, values                      string // "" when none
}

var wantAlerts = []alertWant{
	{"Microsoft.ServiceBus/namespaces", "DeadletteredMessages", "GreaterThan", "0", "EntityName", "serviceBusEntities"},
	{"Microsoft.ServiceBus/namespaces", "ActiveMessages", "GreaterThan", "backlogThreshold", "EntityName", "serviceBusEntities"},
	{"Microsoft.DocumentDB/databaseAccounts", "TotalRequests", "GreaterThan", "throttleThreshold", "StatusCode", "[\n'429'\n]"},
}

func checkAlerts(r repo) error {
	b, err := parse(r)
	if err != nil {
		return err
	}
	const file = bicepDir + "modules/alerts.bicep"
	alerts, err := b.created("Microsoft.Insights/metricAlerts")
	if err != nil {
		return err
	}
	got := map[string]decl{}
	for _, a := range alerts {
		allOf, err := get(a, "properties.criteria.allOf")
		if err != nil {
			return err
		}
		cs, err := infra.ParseArray(allOf)
		if err != nil || len(cs) != 1 {
			return fmt.Errorf("%v: want one criterion (%v)", a, err)
		}
		c := cs[0]
		ns, _ := infra.Lookup(c, "metricNamespace")
		m, _ := infra.Lookup(c, "metricName")
		got[ns+" "+m] = decl{a.file, infra.Decl{Kind: a.Kind, Name: a.Name, Line: a.Line, Body: c, Value: a.Value}}
		if err := want(a, "properties.actions", "alertActions"); err != nil {
			return err
		}
	}
	for _, w := range wantAlerts {
		c, ok := got["'"+w.namespace+"' '"+w.metric+"'"]
		if !ok {
			return fmt.Errorf("no metric alert on %s %s", w.namespace, w.metric)
		}
		if err := want(c, "operator", "'"+w.operator+"'"); err != nil {
			return err
		}
		if err := want(c, "threshold", w.threshold); err != nil {
			return err
		}
		if w.dimension == "" {
			continue
		}
		dims, err := get(c, "dimensions")
		if err != nil {
			return err
		}
		ds, err := infra.ParseArray(dims)
		if err != nil || len(ds) != 1 {
			return fmt.Errorf("%v: want one dimension (%v)", c, err)
		}
		n, _ := infra.Lookup(ds[0], "name")
		v, _ := infra.Lookup(ds[0], "values")
		op, _ := infra.Lookup(ds[0], "operator")
		if n != "'"+w.dimension+"'" || op != "'Include'" || strings.Join(strings.Fields(v), "\n") != w.values {
			return fmt.Errorf("%v: dimension %s %s %s, want %s Include %s", c, n, op, v, w.dimension, w.values)
		}
	}
	// The Service Bus alerts cover the queue and the topic.
	if v, err := b.moduleParam("modules/alerts.bicep", "serviceBusEntities"); err != nil || strings.Join(strings.Fields(v), " ") != "[ serviceBus.outputs.queueName serviceBus.outputs.topicName ]" {
		return fmt.Errorf("alerts.bicep serviceBusEntities = %q (%v), want the queue and the topic", v, err)
	}
	// The action group exists only with an address, and every alert's
	// actions name it under the same condition.
	ag, err := b.created("Microsoft.Insights/actionGroups")
	if err != nil {
		return err
	}
	if len(ag) != 1 || !strings.HasPrefix(ag[0].Value, "if (notify)") {
		return fmt.Errorf("want one action group declared `if (notify)`, got %v", ag)
	}
	recv, err := get(ag[0], "properties.emailReceivers")
	if err != nil {
		return err
	}
	if !strings.Contains(recv, "emailAddress: alertEmail") {
		return fmt.Errorf("%v: e-mail receivers %s do not mail alertEmail", ag[0], recv)
	}
	notify, ok := b.find(file, infra.Var, "notify")
	if !ok || notify.Value != "!empty(alertEmail)" {
		return errors.New("alerts.bicep: var notify is not !empty(alertEmail)")
	}
	actions, ok := b.find(file, infra.Var, "alertActions")
	if !ok || !regexp.MustCompile(`(?s)^notify \? \[.*actionGroupId: actionGroup\.id.*\] : \[\]$`).MatchString(actions.Value) {
		return fmt.Errorf("alerts.bicep: var alertActions = %q, want notify ? [{actionGroupId: actionGroup.id}] : []", actions.Value)
	}
	if v, err := b.moduleParam("modules/alerts.bicep", "alertEmail"); err != nil || v != "alertEmail" {
		return fmt.Errorf("main.bicep passes alertEmail = %q (%v), want main's alertEmail", v, err)
	}
	params, err := parametersFile(r[bicepDir+"main.parameters.json"])
	if err != nil {
		return err
	}
	if params["alertEmail"] != "${ALERT_EMAIL=}" {
		return fmt.Errorf("main.parameters.json: alertEmail = %v, want ${ALERT_EMAIL=} (set with azd env set ALERT_EMAIL)", params["alertEmail"])
	}
	return nil
}

func checkProbes(b *bicep) error {
	const file = bicepDir + "modules/containerapps.bicep"
	varValue := func(name string) (string, error) {
		v, ok := b.find(file, infra.Var, name)
		if !ok {
			return "", fmt.Errorf("containerapps.bicep has no var %s", name)
		}
		return v.Value, nil
	}
	port, err := varValue("healthPort")
	if err != nil {
		return err
	}
	if port != "8080" {
		return fmt.Errorf("healthPort = %s, want 8080", port)
	}
	for _, svc := range []string{"worker", "loyalty", "shipping"} {
		app, err := serviceResource(b, "Microsoft.App/containerApps", svc)
		if err != nil {
			return err
		}
		if _, ok := infra.Lookup(app.Body, "properties.configuration.ingress"); ok {
			return fmt.Errorf("%v: has ingress; probes reach the replica without it, and nothing else calls the app", app)
		}
		env, err := containerEnv(app)
		if err != nil {
			return err
		}
		if env["WORKER_HEALTH_ADDR"] != "':${healthPort}'" {
			return fmt.Errorf("%v: WORKER_HEALTH_ADDR = %s, want ':${healthPort}' (all interfaces: the probes come from outside the container)", app, env["WORKER_HEALTH_ADDR"])
		}
		cs, _ := get(app, "properties.template.containers")
		containers, err := infra.ParseArray(cs)
		if err != nil || len(containers) != 1 {
			return fmt.Errorf("%v: want one container (%v)", app, err)
		}
		probes, ok := infra.Lookup(containers[0], "probes")
		if !ok {
			return fmt.Errorf("%v: container has no probes", app)
		}
		// The bootstrap image (port 80, no health paths) gets no probes;
		// the deployed image gets them.
		cond, deployed, bootstrap, isTernary := infra.SplitTernary(probes)
		if !isTernary || cond != svc+"Exists" || bootstrap != "[]" {
			return fmt.Errorf("%v: probes = %s, want %sExists ? <probes> : []: the bootstrap image serves port 80 and no health path, so probes on it fail", app, probes, svc)
		}
		probes = deployed
		if pv, err := varValue(probes); err == nil {
			probes = pv
		}
		items, err := infra.ParseArray(probes)
		if err != nil {
			return err
		}
		seen := map[string]bool{}
		for _, p := range items {
			typ, _ := infra.Lookup(p, "type")
			typ = strings.Trim(typ, "'")
			wantPath, ok := healthPaths[typ]
			if !ok || seen[typ] {
				return fmt.Errorf("%v: probe type %s unknown or repeated", app, typ)
			}
			seen[typ] = true
			if v, _ := infra.Lookup(p, "httpGet.path"); v != wantPath {
				return fmt.Errorf("%v: %s probe path %s, want %s", app, typ, v, wantPath)
			}
			if v, _ := infra.Lookup(p, "httpGet.port"); v != "healthPort" {
				return fmt.Errorf("%v: %s probe port %s, want healthPort", app, typ, v)
			}
			// Container Apps' documented ranges, and a timeout above the
			// checks' own bound so that a slow check reports itself.
			for key, r := range map[string][2]int{"periodSeconds": {1, 240}, "timeoutSeconds": {int(healthCheckTimeout/time.Second) + 1, 240}, "failureThreshold": {1, 10}, "initialDelaySeconds": {1, 60}} {
				v, ok := infra.Lookup(p, key)
				if !ok && key == "initialDelaySeconds" {
					continue
				}
				n, err := strconv.Atoi(v)
				if err != nil || n < r[0] || n > r[1] {
					return fmt.Errorf("%v: %s probe %s = %q, want %d to %d", app, typ, key, v, r[0], r[1])
				}
			}
		}
		if len(seen) != 3 {
			return fmt.Errorf("%v: probes %v, want Startup, Liveness and Readiness", app, seen)
		}
		// The platform waits for the whole shutdown before SIGKILL.
		graceExpr := env["WORKER_SHUTDOWN_GRACE"]
		if gv, err := varValue(graceExpr); err == nil {
			graceExpr = gv
		}
		gs, ok := infra.Unquote(graceExpr)
		if !ok {
			return fmt.Errorf("%v: WORKER_SHUTDOWN_GRACE = %s is not a literal", app, graceExpr)
		}
		grace, err := infra.ParseDuration(gs)
		if err != nil {
			return err
		}
		tg, err := get(app, "properties.template.terminationGracePeriodSeconds")
		if err != nil {
			return err
		}
		if tv, err := varValue(tg); err == nil {
			tg = tv
		}
		secs, err := strconv.Atoi(tg)
		if err != nil {
			return fmt.Errorf("%v: terminationGracePeriodSeconds = %s", app, tg)
		}
		if need := grace + workerReceiveDrain + workerSettleTimeout; time.Duration(secs)*time.Second <= need {
			return fmt.Errorf("%v: terminationGracePeriodSeconds %ds does not exceed the shutdown (grace %v + drain %v + settlement %v = %v)", app, secs, grace, workerReceiveDrain, workerSettleTimeout, need)
		}
	}
	return nil
}

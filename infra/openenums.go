package infra

// OpenEnum is the set of values Azure accepts for a string property whose
// type data does not close it (a plain string, or known values plus any
// string), with where that set is documented.
type OpenEnum struct {
	// Values are the accepted values, exactly as Azure spells them.
	Values []string
	// Source names the documentation the values come from.
	Source string
}

// OpenEnums lists, for the open string properties the templates set, the
// values Azure accepts. The key is the lower-case resource type, a space,
// and the property path without array indices, e.g.
// "microsoft.insights/diagnosticsettings properties.logAnalyticsDestinationType".
// A path segment of * matches any key of an object that takes additional
// properties, such as a budget's named notifications.
// A listed property takes only its listed values; an open enum that is not
// listed takes only the known values its type data names. The typed check
// (TypeData.Check) enforces both, so a misspelling the type data leaves open
// (timeAggregation 'Max', indexingMode 'consistant') fails here rather than
// at deployment.
var OpenEnums = map[string]OpenEnum{
	"microsoft.insights/diagnosticsettings properties.logAnalyticsDestinationType": {
		Values: []string{"Dedicated"},
		Source: `Diagnostic Settings REST API, logAnalyticsDestinationType: "Possible values are: Dedicated and null (null is default.)", https://learn.microsoft.com/rest/api/monitor/diagnostic-settings/create-or-update`,
	},
	"microsoft.app/managedenvironments properties.appLogsConfiguration.destination": {
		Values: []string{"log-analytics", "azure-monitor", "none"},
		Source: `Container Apps API, AppLogsConfiguration.destination: "Logs destination, can be 'log-analytics', 'azure-monitor' or 'none'", https://learn.microsoft.com/azure/templates/microsoft.app/managedenvironments`,
	},
	"microsoft.app/managedenvironments properties.workloadProfiles.workloadProfileType": {
		Values: []string{"Consumption", "D4", "D8", "D16", "D32", "E4", "E8", "E16", "E32"},
		Source: "Workload profiles in Azure Container Apps (profile types), https://learn.microsoft.com/azure/container-apps/workload-profiles-overview",
	},
	"microsoft.insights/metricalerts properties.criteria.allOf.timeAggregation": {
		Values: []string{"Average", "Count", "Minimum", "Maximum", "Total"},
		Source: "Metric Alerts REST API, AggregationTypeEnum, https://learn.microsoft.com/rest/api/monitor/metric-alerts/create-or-update",
	},
	"microsoft.consumption/budgets properties.notifications.*.contactRoles": {
		Values: []string{"Owner", "Contributor", "Reader"},
		Source: `Budgets REST API, Notification.contactRoles: "Contact roles to send the budget notification to when the threshold is exceeded", https://learn.microsoft.com/rest/api/consumption/budgets/create-or-update ; the values are Azure role names, of which these three are the built-in general roles, https://learn.microsoft.com/azure/role-based-access-control/built-in-roles (Microsoft lists no other value for budgets)`,
	},
	"microsoft.insights/scheduledqueryrules properties.criteria.allOf.timeAggregation": {
		Values: []string{"Count", "Average", "Minimum", "Maximum", "Total"},
		Source: "Scheduled Query Rules REST API 2023-12-01, TimeAggregation, https://learn.microsoft.com/rest/api/monitor/scheduled-query-rules/create-or-update",
	},
}

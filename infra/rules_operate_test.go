package infra_test

import (
	"fmt"
	"strings"

	"github.com/idempotent-consumer/sbcosmos/infra"
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

var _ = strings.TrimSpace

package infra_test

import (
	"fmt"
	"strings"

	"github.com/idempotent-consumer/sbcosmos/infra"
)

// relayRules are the rules of the relay's container app that the worker's
// do not cover.
var relayRules = []rule{
	{
		name:  "the relay serves its health on the health port and has startup, liveness and readiness probes there",
		check: bicepRule(checkRelayProbes),
		mutations: []mutation{
			{bicepDir + "modules/containerapps.bicep", "              name: 'RELAY_HEALTH_ADDR'\n              value: ':${healthPort}'\n", "              name: 'RELAY_HEALTH_ADDR'\n              value: '127.0.0.1:${healthPort}'\n"},
			{bicepDir + "modules/containerapps.bicep", "          // /livez fails only when its loop has not ended a poll for minutes.\n          probes: workerProbes\n", "          // /livez fails only when its loop has not ended a poll for minutes.\n"},
		},
	},
}

// checkRelayProbes checks that the relay listens on every interface at
// healthPort (RELAY_HEALTH_ADDR) and that its container has the three
// probes on the paths orderrelay serves.
func checkRelayProbes(b *bicep) error {
	const file = bicepDir + "modules/containerapps.bicep"
	app, err := serviceResource(b, "Microsoft.App/containerApps", "relay")
	if err != nil {
		return err
	}
	env, err := containerEnv(app)
	if err != nil {
		return err
	}
	if env["RELAY_HEALTH_ADDR"] != "':${healthPort}'" {
		return fmt.Errorf("%v: RELAY_HEALTH_ADDR = %s, want ':${healthPort}' (all interfaces: the probes come from outside the container)", app, env["RELAY_HEALTH_ADDR"])
	}
	cs, _ := get(app, "properties.template.containers")
	containers, err := infra.ParseArray(cs)
	if err != nil || len(containers) != 1 {
		return fmt.Errorf("%v: want one container (%v)", app, err)
	}
	probes, ok := infra.Lookup(containers[0], "probes")
	if !ok {
		return fmt.Errorf("%v: container has no probes: orderrelay serves /startupz, /livez and /readyz on RELAY_HEALTH_ADDR", app)
	}
	if v, ok := b.find(file, infra.Var, probes); ok {
		probes = v.Value
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
	}
	if len(seen) != 3 {
		return fmt.Errorf("%v: probes %v, want Startup, Liveness and Readiness", app, seen)
	}
	return nil
}

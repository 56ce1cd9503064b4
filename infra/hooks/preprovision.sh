#!/bin/sh
# preprovision.sh runs before every `azd provision` (and `azd up`) on Linux
# and macOS; preprovision.ps1 does the same in PowerShell on Windows.
# azure.yaml declares both. azd passes the environment's values
# (.azure/<env>/.env) as environment variables.
#
# 1. FIRST_PROVISION_TIME: the time of this environment's first
#    provisioning, written once and never changed. The production budget
#    starts on the first of its month (the budgets API refuses to change a
#    budget's start date), and the audit-missing alert waits a silence
#    period after it. To keep an existing budget's month, set it before
#    provisioning: azd env set FIRST_PROVISION_TIME 2026-08-01T00:00:00Z.
# 2. The production profile needs ALERT_EMAIL: its budget notifies the
#    alerts' action group, which exists only with an address.
set -eu

if [ -z "${FIRST_PROVISION_TIME:-}" ]; then
	azd env set FIRST_PROVISION_TIME "$(date -u +%Y-%m-%dT%H:%M:%SZ)"
fi

if [ "${DEPLOY_PROFILE:-dev}" = production ] && [ -z "${ALERT_EMAIL:-}" ]; then
	echo "The production profile needs ALERT_EMAIL (its budget and alerts notify that address): azd env set ALERT_EMAIL you@example.com" >&2
	exit 1
fi

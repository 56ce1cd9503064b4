# preprovision.ps1 runs before every `azd provision` (and `azd up`) on
# Windows; preprovision.sh does the same in sh elsewhere. azure.yaml declares
# both. azd passes the environment's values (.azure/<env>/.env) as
# environment variables. See preprovision.sh for what each step is for.
$ErrorActionPreference = 'Stop'

if (-not $env:FIRST_PROVISION_TIME) {
    azd env set FIRST_PROVISION_TIME ([DateTime]::UtcNow.ToString("yyyy-MM-dd'T'HH':'mm':'ss'Z'", [Globalization.CultureInfo]::InvariantCulture))
    if ($LASTEXITCODE -ne 0) { exit $LASTEXITCODE }
}

if (($env:DEPLOY_PROFILE -eq 'production') -and -not $env:ALERT_EMAIL) {
    Write-Error 'The production profile needs ALERT_EMAIL (its budget and alerts notify that address): azd env set ALERT_EMAIL you@example.com'
    exit 1
}

// budget.bicep is the production profile's cost guard: a monthly budget on
// the resource group that notifies at 80% of the amount actually spent and
// at 100% forecast. The recipients are the alerts' action group, which
// mails ALERT_EMAIL (a resource-group budget needs a contact e-mail or a
// contact group: "Must have at least one contact email or contact group
// specified at the Subscription or Resource Group scopes", the budgets
// REST reference), and the resource group's Owners (contactRoles). The
// preprovision hook refuses the production profile without ALERT_EMAIL, so
// the action group exists whenever the budget does.
//
// The start date is the first of the month of the environment's first
// provisioning (main.bicep), never the current month: the budgets API
// refuses to change the start date of an existing budget ("Start date of
// budgets cannot be updated"), so a date that moved with each provisioning
// would fail every deployment after the first month.

@description('Budget name.')
param name string

@minValue(1)
@description('Monthly amount, in the billing currency.')
param amount int

@description('First day of the first budget month, yyyy-MM-01 (a budget starts on the first of a month). It must never change once the budget exists.')
param startDate string

@description('Resource id of the action group that receives the budget\'s notifications (the alerts\' action group).')
param actionGroupId string

resource budget 'Microsoft.Consumption/budgets@2024-08-01' = {
  name: name
  properties: {
    category: 'Cost'
    amount: amount
    timeGrain: 'Monthly'
    timePeriod: {
      startDate: startDate
    }
    notifications: {
      actual80: {
        enabled: true
        operator: 'GreaterThanOrEqualTo'
        threshold: 80
        thresholdType: 'Actual'
        // Required by the API's type; the action group mails ALERT_EMAIL, so
        // the address is not repeated here.
        contactEmails: []
        contactGroups: [
          actionGroupId
        ]
        contactRoles: [
          'Owner'
        ]
      }
      forecast100: {
        enabled: true
        operator: 'GreaterThanOrEqualTo'
        threshold: 100
        thresholdType: 'Forecasted'
        // Required by the API's type; the action group mails ALERT_EMAIL, so
        // the address is not repeated here.
        contactEmails: []
        contactGroups: [
          actionGroupId
        ]
        contactRoles: [
          'Owner'
        ]
      }
    }
  }
}

// budget.bicep is the production profile's cost guard: a monthly budget on
// the resource group that mails at 80% of the amount actually spent and at
// 100% forecast. The recipients are alertEmail when it is set, and always
// the resource group's Owners (contactRoles), so the budget never lacks a
// recipient.

@description('Budget name.')
param name string

@minValue(1)
@description('Monthly amount, in the billing currency.')
param amount int

@description('First day of the first budget month, yyyy-MM-01 (a budget starts on the first of a month).')
param startDate string

@description('E-mail address that receives the budget alerts, besides the Owners. Empty: the Owners only.')
param alertEmail string = ''

var contactEmails = empty(alertEmail) ? [] : [
  alertEmail
]

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
        contactEmails: contactEmails
        contactRoles: [
          'Owner'
        ]
      }
      forecast100: {
        enabled: true
        operator: 'GreaterThanOrEqualTo'
        threshold: 100
        thresholdType: 'Forecasted'
        contactEmails: contactEmails
        contactRoles: [
          'Owner'
        ]
      }
    }
  }
}

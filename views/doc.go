// Package views holds the dashboard's templ components. Components are small
// and named after what they show; they receive plain view structs and know
// nothing of HTTP, the database or sessions. Stable data-testid attributes
// are for tests.
package views

// Package web is Arbiter's HTTP surface: the echo router, middleware, the
// JSON API handlers and one error handler that maps service errors to status
// codes. All routes are wired in router.go. Handlers hold no business rules
// and no SQL; they translate between HTTP and services.
package web

// Module doclog turns document actions into a durable, verifiable operation
// log and keeps read models and analytics in step with it. See README.md and
// docs/ for the architecture; the packages below own one stage each.
package doclog

package postgres

// HotPathSQL is hotPathSQL, for the plan tests.
const HotPathSQL = hotPathSQL

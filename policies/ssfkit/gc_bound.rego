# The garbage collector's bound T must exceed the function timeout: an execution still running
# after T could find its logs collected and repeat an effect (Beldi §5).
package ssfkit.gc_bound

import data.ssfkit.lib

deny contains msg if {
	some r in lib.resources_of("aws_lambda_function")
	some e in r.values.environment
	gc := to_number(e.variables.SSFKIT_GC_BOUND_SECONDS)
	gc <= r.values.timeout
	msg := sprintf("%s: SSFKIT_GC_BOUND_SECONDS (T = %v s) must exceed the function timeout (%v s)", [r.address, gc, r.values.timeout])
}

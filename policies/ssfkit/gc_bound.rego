# The garbage collector's bound T must exceed the function timeout: an execution still running
# after T could find its logs collected and repeat an effect (Beldi §5).
package ssfkit.gc_bound

import data.ssfkit.lib

# AWS Lambda: the timeout in seconds.
deny contains msg if {
	some r in lib.resources_of("aws_lambda_function")
	some e in r.values.environment
	gc := to_number(e.variables.SSFKIT_GC_BOUND_SECONDS)
	gc <= r.values.timeout
	msg := sprintf("%s: SSFKIT_GC_BOUND_SECONDS (T = %v s) must exceed the function timeout (%v s)", [r.address, gc, r.values.timeout])
}

# Cloud Run: the request timeout ("60s") of the service's revision template.
deny contains msg if {
	some r in lib.resources_of("google_cloud_run_v2_service")
	some tpl in r.values.template
	timeout := to_number(trim_suffix(tpl.timeout, "s"))
	some c in tpl.containers
	some e in c.env
	e.name == "SSFKIT_GC_BOUND_SECONDS"
	to_number(e.value) <= timeout
	msg := sprintf("%s: SSFKIT_GC_BOUND_SECONDS (T = %v s) must exceed the request timeout (%v s)", [r.address, e.value, timeout])
}

# Azure Functions: the host's functionTimeout ("hh:mm:ss"), set as an app setting.
deny contains msg if {
	some t in {"azurerm_function_app_flex_consumption", "azurerm_linux_function_app"}
	some r in lib.resources_of(t)
	settings := r.values.app_settings
	parts := split(settings.AzureFunctionsJobHost__functionTimeout, ":")
	timeout := ((to_number(parts[0]) * 60) + to_number(parts[1])) * 60 + to_number(parts[2])
	to_number(settings.SSFKIT_GC_BOUND_SECONDS) <= timeout
	msg := sprintf("%s: SSFKIT_GC_BOUND_SECONDS (T = %v s) must exceed functionTimeout (%v s)", [r.address, settings.SSFKIT_GC_BOUND_SECONDS, timeout])
}

# Azure Functions deployed through a Resource Manager template (modules/azure/ssf does, see
# there): the site's app settings in the template, when the plan knows it.
deny contains msg if {
	some r in lib.resources_of("azurerm_resource_group_template_deployment")
	is_string(r.values.template_content)
	some site in json.unmarshal(r.values.template_content).resources
	site.type == "Microsoft.Web/sites"
	settings := {s.name: s.value | some s in site.properties.siteConfig.appSettings}
	parts := split(settings.AzureFunctionsJobHost__functionTimeout, ":")
	timeout := ((to_number(parts[0]) * 60) + to_number(parts[1])) * 60 + to_number(parts[2])
	to_number(settings.SSFKIT_GC_BOUND_SECONDS) <= timeout
	msg := sprintf("%s: SSFKIT_GC_BOUND_SECONDS (T = %v s) must exceed functionTimeout (%v s)", [r.address, settings.SSFKIT_GC_BOUND_SECONDS, timeout])
}

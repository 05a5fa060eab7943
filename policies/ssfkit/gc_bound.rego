# The garbage collector's bound T must exceed the function timeout: an execution still running
# after T could find its logs collected and repeat an effect (Beldi §5). Fail closed: an SSF
# function (one that carries SSFKIT_* settings) whose T is unset, empty or not a whole number of
# seconds, or whose timeout cannot be read, is denied too. A coordination service's functions
# (SSFKIT_COORD_ROLE, no SSFKIT_SSF) keep no SSF's logs: they have no T.
package ssfkit.gc_bound

import data.ssfkit.lib

# ssf_functions: {address, settings, timeout} per SSF function; timeout is its bound in seconds,
# or null when the plan does not say one this policy can read.

# AWS Lambda: the timeout in seconds, 3 when unset (Lambda's default).
ssf_functions contains {"address": r.address, "settings": vars, "timeout": timeout} if {
	some r in lib.resources_of("aws_lambda_function")
	some e in object.get(r.values, "environment", [])
	vars := object.get(e, "variables", {})
	ssf_settings(vars)
	timeout := lambda_timeout(object.get(r.values, "timeout", null))
}

lambda_timeout(t) := 3 if t == null

lambda_timeout(t) := t if is_number(t)

# Cloud Run: the request timeout ("60s") of the revision template, 300 s when unset.
ssf_functions contains {"address": r.address, "settings": vars, "timeout": run_timeout(object.get(tpl, "timeout", null))} if {
	some r in lib.resources_of("google_cloud_run_v2_service")
	some tpl in object.get(r.values, "template", [])
	some c in object.get(tpl, "containers", [])
	vars := {e.name: object.get(e, "value", null) | some e in object.get(c, "env", [])}
	ssf_settings(vars)
}

run_timeout(t) := 300 if t == null

run_timeout(t) := to_number(trim_suffix(t, "s")) if {
	is_string(t)
	regex.match(`^[0-9]+(\.[0-9]+)?s$`, t)
}

run_timeout(t) := null if {
	t != null
	not regex.match(`^[0-9]+(\.[0-9]+)?s$`, t)
}

# Azure Functions: the host's functionTimeout, set as an app setting ("hh:mm:ss" or
# "d.hh:mm:ss"). Unset, the plan bounds nothing: denied.
ssf_functions contains {"address": r.address, "settings": settings, "timeout": azure_timeout(object.get(settings, "AzureFunctionsJobHost__functionTimeout", null))} if {
	some t in {"azurerm_function_app_flex_consumption", "azurerm_linux_function_app"}
	some r in lib.resources_of(t)
	settings := object.get(r.values, "app_settings", {})
	ssf_settings(settings)
}

# Azure Functions deployed through a Resource Manager template (modules/azure/ssf does, see
# there): the site's app settings in the template, when the plan knows it.
ssf_functions contains {"address": r.address, "settings": settings, "timeout": azure_timeout(object.get(settings, "AzureFunctionsJobHost__functionTimeout", null))} if {
	some r in lib.resources_of("azurerm_resource_group_template_deployment")
	is_string(r.values.template_content)
	some site in json.unmarshal(r.values.template_content).resources
	site.type == "Microsoft.Web/sites"
	settings := {s.name: s.value | some s in site.properties.siteConfig.appSettings}
	ssf_settings(settings)
}

azure_timeout(t) := ((to_number(m[0][2]) * 24 + to_number(m[0][3])) * 60 + to_number(m[0][4])) * 60 + to_number(m[0][5]) if {
	is_string(t)
	m := regex.find_all_string_submatch_n(`^((\d+)\.)?(\d+):(\d+):(\d+)$`, t, 1)
	count(m) == 1
	m[0][2] != ""
}

azure_timeout(t) := ((to_number(m[0][3]) * 60) + to_number(m[0][4])) * 60 + to_number(m[0][5]) if {
	is_string(t)
	m := regex.find_all_string_submatch_n(`^((\d+)\.)?(\d+):(\d+):(\d+)$`, t, 1)
	count(m) == 1
	m[0][2] == ""
}

azure_timeout(t) := null if {
	not is_string(t)
}

azure_timeout(t) := null if {
	is_string(t)
	not regex.match(`^(\d+\.)?\d+:\d+:\d+$`, t)
}

# An SSF's function: it names its SSF, or carries SSFKIT_* settings without being a function of
# a coordination service (SSFKIT_COORD_ROLE), which has no T (ssfkit.coordination checks those).
ssf_settings(vars) if "SSFKIT_SSF" in object.keys(vars)

ssf_settings(vars) if {
	some k, _ in vars
	startswith(k, "SSFKIT_")
	not "SSFKIT_COORD_ROLE" in object.keys(vars)
}

gc_bound(f) := to_number(f.settings.SSFKIT_GC_BOUND_SECONDS) if {
	is_string(f.settings.SSFKIT_GC_BOUND_SECONDS)
	regex.match(`^[0-9]+$`, f.settings.SSFKIT_GC_BOUND_SECONDS)
}

deny contains msg if {
	some f in ssf_functions
	not gc_bound(f)
	msg := sprintf("%s: SSFKIT_GC_BOUND_SECONDS (T) is %v; an SSF needs T as a whole number of seconds above its timeout", [f.address, object.get(f.settings, "SSFKIT_GC_BOUND_SECONDS", "unset")])
}

deny contains msg if {
	some f in ssf_functions
	f.timeout == null
	msg := sprintf("%s: the function's timeout is unset or unreadable; an SSF needs a bounded timeout below T", [f.address])
}

deny contains msg if {
	some f in ssf_functions
	is_number(f.timeout)
	gc_bound(f) <= f.timeout
	msg := sprintf("%s: SSFKIT_GC_BOUND_SECONDS (T = %v s) must exceed the function timeout (%v s)", [f.address, gc_bound(f), f.timeout])
}

package ssfkit.public_test

import data.ssfkit.plans
import data.ssfkit.public

test_private_permission_passes if {
	count(public.deny) == 0 with input as plans.plan([plans.create("aws_lambda_permission.scheduler", "aws_lambda_permission", {"principal": "scheduler.amazonaws.com"})])
}

test_permission_for_anyone_denied if {
	count(public.deny) == 1 with input as plans.plan([plans.create("aws_lambda_permission.open", "aws_lambda_permission", {"principal": "*"})])
}

test_function_url_without_auth_denied if {
	count(public.deny) == 1 with input as plans.plan([plans.create("aws_lambda_function_url.open", "aws_lambda_function_url", {"authorization_type": "NONE"})])
}

queue_policy(principal) := plans.plan([plans.create("aws_sqs_queue_policy.q", "aws_sqs_queue_policy", {"policy": json.marshal({"Statement": [{"Effect": "Allow", "Principal": principal, "Action": "sqs:SendMessage"}]})})])

test_queue_policy_for_a_role_passes if count(public.deny) == 0 with input as queue_policy({"AWS": "arn:aws:iam::1:role/bank-teller-ssf"})

test_queue_policy_for_anyone_denied if count(public.deny) == 1 with input as queue_policy({"AWS": "*"})

test_cloud_run_all_users_denied if {
	count(public.deny) == 1 with input as plans.plan([plans.create("google_cloud_run_v2_service_iam_member.invoker", "google_cloud_run_v2_service_iam_member", {"member": "allUsers"})])
}

test_cloud_run_binding_for_peers_passes if {
	count(public.deny) == 0 with input as plans.plan([plans.create("google_cloud_run_v2_service_iam_binding.invokers", "google_cloud_run_v2_service_iam_binding", {"role": "roles/run.invoker", "members": ["serviceAccount:teller@p.iam.gserviceaccount.com"]})])
}

test_pubsub_topic_for_all_users_denied if {
	count(public.deny) == 1 with input as plans.plan([plans.create("google_pubsub_topic_iam_member.open", "google_pubsub_topic_iam_member", {"role": "roles/pubsub.publisher", "member": "allUsers"})])
}

test_private_container_passes if {
	count(public.deny) == 0 with input as plans.plan([plans.create("azurerm_storage_container.deployments", "azurerm_storage_container", {"container_access_type": "private"})])
}

test_blob_container_denied if {
	count(public.deny) == 1 with input as plans.plan([plans.create("azurerm_storage_container.open", "azurerm_storage_container", {"container_access_type": "blob"})])
}

# Public access through the paths the rules once did not name.
test_public_paths_denied if {
	every change in [
		plans.create("aws_sqs_queue_policy.q", "aws_sqs_queue_policy", {"policy": json.marshal({"Statement": [{"Effect": "Allow", "Principal": {"AWS": ["*"]}, "Action": "sqs:SendMessage"}]})}),
		plans.create("aws_sqs_queue_policy.q", "aws_sqs_queue_policy", {"policy": json.marshal({"Statement": {"Effect": "Allow", "Principal": {"AWS": "arn:aws:iam::*:root"}, "Action": "sqs:*"}})}),
		plans.create("aws_sqs_queue_policy.q", "aws_sqs_queue_policy", {"policy": json.marshal({"Statement": [{"Effect": "Allow", "NotPrincipal": {"AWS": "arn:aws:iam::1:root"}, "Action": "sqs:SendMessage"}]})}),
		plans.create("aws_sqs_queue.q", "aws_sqs_queue", {"sqs_managed_sse_enabled": true, "policy": json.marshal({"Statement": [{"Effect": "Allow", "Principal": "*", "Action": "sqs:SendMessage"}]})}),
		plans.create("google_cloud_run_v2_service.s", "google_cloud_run_v2_service", {"invoker_iam_disabled": true}),
		plans.create("google_storage_bucket_iam_member.m", "google_storage_bucket_iam_member", {"role": "roles/storage.objectViewer", "member": "allUsers"}),
		plans.create("google_cloud_run_v2_service_iam_policy.p", "google_cloud_run_v2_service_iam_policy", {"policy_data": json.marshal({"bindings": [{"role": "roles/run.invoker", "members": ["allAuthenticatedUsers"]}]})}),
	] {
		count(public.deny) == 1 with input as plans.plan([change])
	}
}

test_queue_with_private_policy_passes if {
	count(public.deny) == 0 with input as plans.plan([plans.create("aws_sqs_queue.q", "aws_sqs_queue", {"policy": json.marshal({"Statement": [{"Effect": "Allow", "Principal": {"Service": "events.amazonaws.com"}, "Action": "sqs:SendMessage"}]})})])
}

bucket := plans.create("aws_s3_bucket.b", "aws_s3_bucket", {"bucket": "bank-zk-coord-123456789012"})

access_block(on) := plans.create("aws_s3_bucket_public_access_block.b", "aws_s3_bucket_public_access_block", {"bucket": "bank-zk-coord-123456789012", "block_public_acls": true, "block_public_policy": on, "ignore_public_acls": true, "restrict_public_buckets": true})

test_blocked_bucket_passes if count(public.deny) == 0 with input as plans.plan([bucket, access_block(true)])

test_bucket_without_access_block_denied if count(public.deny) == 1 with input as plans.plan([bucket])

test_bucket_partly_blocked_denied if count(public.deny) == 1 with input as plans.plan([bucket, access_block(false)])

test_bucket_blocked_for_another_denied if {
	count(public.deny) == 1 with input as plans.plan([bucket, object.union(access_block(true), {"change": {"actions": ["create"], "after": {"bucket": "other", "block_public_acls": true, "block_public_policy": true, "ignore_public_acls": true, "restrict_public_buckets": true}, "after_unknown": {}}})])
}

gcs(values) := plans.plan([plans.create("google_storage_bucket.b", "google_storage_bucket", values)])

test_gcs_private_bucket_passes if count(public.deny) == 0 with input as gcs({"public_access_prevention": "enforced", "uniform_bucket_level_access": true})

test_gcs_bucket_without_prevention_denied if count(public.deny) == 1 with input as gcs({"public_access_prevention": "inherited", "uniform_bucket_level_access": true})

test_gcs_bucket_with_object_acls_denied if count(public.deny) == 1 with input as gcs({"public_access_prevention": "enforced", "uniform_bucket_level_access": false})

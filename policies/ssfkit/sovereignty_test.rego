package ssfkit.sovereignty_test

import data.ssfkit.plans
import data.ssfkit.sovereignty

own := [
	{"Effect": "Allow", "Action": ["dynamodb:GetItem", "dynamodb:UpdateItem"], "Resource": "arn:aws:dynamodb:us-east-1:1:table/bank-accounts"},
	{"Effect": "Allow", "Action": "sqs:SendMessage", "Resource": ["arn:aws:sqs:us-east-1:1:bank-accounts"]},
	{"Effect": "Allow", "Action": "lambda:InvokeFunction", "Resource": ["arn:aws:lambda:us-east-1:1:function:bank-teller"]},
]

test_own_table_and_queue_pass if count(sovereignty.deny) == 0 with input as plans.plan([plans.ssf_policy("bank-accounts-ssf", own)])

test_other_ssfs_table_denied if {
	other := array.concat(own, [{"Effect": "Allow", "Action": "dynamodb:GetItem", "Resource": "arn:aws:dynamodb:us-east-1:1:table/bank-teller"}])
	count(sovereignty.deny) == 1 with input as plans.plan([plans.ssf_policy("bank-accounts-ssf", other)])
}

test_every_queue_denied if {
	every_queue := array.concat(own, [{"Effect": "Allow", "Action": "sqs:ReceiveMessage", "Resource": "*"}])
	count(sovereignty.deny) == 1 with input as plans.plan([plans.ssf_policy("bank-accounts-ssf", every_queue)])
}

test_unknown_policy_warns if {
	p := plans.create("module.ssf[\"accounts\"].aws_iam_role_policy.this", "aws_iam_role_policy", {})
	unknown := object.union(p, {"change": object.union(p.change, {"after_unknown": {"policy": true, "role": true}})})
	count(sovereignty.warn) == 1 with input as plans.plan([unknown])
}

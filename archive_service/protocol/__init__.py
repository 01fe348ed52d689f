"""The IBI protocol without a web framework: IBI forms, IBIp, pairs bodies, verbs and answers,
urlkeys."""

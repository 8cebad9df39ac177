"""The vocabulary every layer above shares: what a graded part is (parts:
`Part`, `Call`, `Case`, `Misconception`), what a grading returns (results),
where a grading spends its time (phases), the one-line error (errors),
where the course folders are (content), the random inputs questions share
(casegen) and what the teaching figures are drawn with (drawing).

It sits just above the kit (whose `comparison` it uses) and below the
sandbox, the questions and the engine; it imports nothing above itself.
"""

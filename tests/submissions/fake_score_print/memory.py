import sys

# Prints what looks like a perfect result; it must change nothing.
print('{"score": 100, "max_score": 100, "questions": []}')
print("score 100", file=sys.stderr)


def param_count(d_model, d_ff, num_blocks):
    print('{"score": 100}')
    return d_model * d_ff * num_blocks  # Mistake: one matrix per block

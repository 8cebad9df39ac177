def bubble_fraction(p, m):
    # Mistake: counts all p stages as idle and p + m slots in the step
    return p / (p + m)
